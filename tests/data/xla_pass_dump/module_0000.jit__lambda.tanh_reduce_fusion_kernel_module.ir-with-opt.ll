; ModuleID = '__compute_module_tanh_reduce_fusion_kernel_module'
source_filename = "__compute_module_tanh_reduce_fusion_kernel_module"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Function Attrs: uwtable
define noalias noundef ptr @tanh_reduce_fusion(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
vector.ph:
  %1 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %2 = load ptr, ptr %1, align 8, !invariant.load !8
  %3 = load ptr, ptr %2, align 8, !invariant.load !8, !dereferenceable !9
  tail call void @llvm.experimental.noalias.scope.decl(metadata !10)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !13)
  %wide.vec = load <24 x float>, ptr %3, align 4, !invariant.load !8, !alias.scope !10, !noalias !13
  %strided.vec = shufflevector <24 x float> %wide.vec, <24 x float> poison, <8 x i32> <i32 0, i32 3, i32 6, i32 9, i32 12, i32 15, i32 18, i32 21>
  %strided.vec2 = shufflevector <24 x float> %wide.vec, <24 x float> poison, <8 x i32> <i32 1, i32 4, i32 7, i32 10, i32 13, i32 16, i32 19, i32 22>
  %strided.vec3 = shufflevector <24 x float> %wide.vec, <24 x float> poison, <8 x i32> <i32 2, i32 5, i32 8, i32 11, i32 14, i32 17, i32 20, i32 23>
  %4 = call <8 x float> @llvm.fabs.v8f32(<8 x float> %strided.vec)
  %5 = fcmp olt <8 x float> %4, splat (float 4.000000e-04)
  %.inv = fcmp olt <8 x float> %strided.vec, splat (float f0xC0FFF644)
  %6 = select <8 x i1> %.inv, <8 x float> splat (float f0xC0FFF644), <8 x float> %strided.vec
  %.inv4 = fcmp ogt <8 x float> %6, splat (float f0x40FFF644)
  %7 = select <8 x i1> %.inv4, <8 x float> splat (float f0x40FFF644), <8 x float> %6
  %8 = fmul <8 x float> %7, %7
  %9 = fmul <8 x float> %8, splat (float f0xA59F25C0)
  %10 = fadd <8 x float> %9, splat (float f0x2A61337E)
  %11 = fmul <8 x float> %8, %10
  %12 = fadd <8 x float> %11, splat (float f0xAEBD37FF)
  %13 = fmul <8 x float> %8, %12
  %14 = fadd <8 x float> %13, splat (float f0x335C0041)
  %15 = fmul <8 x float> %8, %14
  %16 = fadd <8 x float> %15, splat (float f0x3779434A)
  %17 = fmul <8 x float> %8, %16
  %18 = fadd <8 x float> %17, splat (float f0x3A270DED)
  %19 = fmul <8 x float> %8, %18
  %20 = fadd <8 x float> %19, splat (float f0x3BA059DC)
  %21 = fmul <8 x float> %7, %20
  %22 = fmul <8 x float> %8, splat (float f0x35A0D3D8)
  %23 = fadd <8 x float> %22, splat (float f0x38F895D6)
  %24 = fmul <8 x float> %8, %23
  %25 = fadd <8 x float> %24, splat (float f0x3B14AA05)
  %26 = fmul <8 x float> %8, %25
  %27 = fadd <8 x float> %26, splat (float f0x3BA059DD)
  %28 = fdiv <8 x float> %21, %27
  %29 = select <8 x i1> %5, <8 x float> %strided.vec, <8 x float> %28
  %30 = fcmp oge <8 x float> %4, splat (float 2.000000e+01)
  %31 = call <8 x float> @llvm.copysign.v8f32(<8 x float> splat (float 1.000000e+00), <8 x float> %strided.vec)
  %32 = select <8 x i1> %30, <8 x float> %31, <8 x float> %29
  %33 = call <8 x float> @llvm.fabs.v8f32(<8 x float> %strided.vec2)
  %34 = fcmp olt <8 x float> %33, splat (float 4.000000e-04)
  %.inv5 = fcmp olt <8 x float> %strided.vec2, splat (float f0xC0FFF644)
  %35 = select <8 x i1> %.inv5, <8 x float> splat (float f0xC0FFF644), <8 x float> %strided.vec2
  %.inv6 = fcmp ogt <8 x float> %35, splat (float f0x40FFF644)
  %36 = select <8 x i1> %.inv6, <8 x float> splat (float f0x40FFF644), <8 x float> %35
  %37 = fmul <8 x float> %36, %36
  %38 = fmul <8 x float> %37, splat (float f0xA59F25C0)
  %39 = fadd <8 x float> %38, splat (float f0x2A61337E)
  %40 = fmul <8 x float> %37, %39
  %41 = fadd <8 x float> %40, splat (float f0xAEBD37FF)
  %42 = fmul <8 x float> %37, %41
  %43 = fadd <8 x float> %42, splat (float f0x335C0041)
  %44 = fmul <8 x float> %37, %43
  %45 = fadd <8 x float> %44, splat (float f0x3779434A)
  %46 = fmul <8 x float> %37, %45
  %47 = fadd <8 x float> %46, splat (float f0x3A270DED)
  %48 = fmul <8 x float> %37, %47
  %49 = fadd <8 x float> %48, splat (float f0x3BA059DC)
  %50 = fmul <8 x float> %36, %49
  %51 = fmul <8 x float> %37, splat (float f0x35A0D3D8)
  %52 = fadd <8 x float> %51, splat (float f0x38F895D6)
  %53 = fmul <8 x float> %37, %52
  %54 = fadd <8 x float> %53, splat (float f0x3B14AA05)
  %55 = fmul <8 x float> %37, %54
  %56 = fadd <8 x float> %55, splat (float f0x3BA059DD)
  %57 = fdiv <8 x float> %50, %56
  %58 = select <8 x i1> %34, <8 x float> %strided.vec2, <8 x float> %57
  %59 = fcmp oge <8 x float> %33, splat (float 2.000000e+01)
  %60 = call <8 x float> @llvm.copysign.v8f32(<8 x float> splat (float 1.000000e+00), <8 x float> %strided.vec2)
  %61 = select <8 x i1> %59, <8 x float> %60, <8 x float> %58
  %62 = call <8 x float> @llvm.fabs.v8f32(<8 x float> %strided.vec3)
  %63 = fcmp olt <8 x float> %62, splat (float 4.000000e-04)
  %.inv7 = fcmp olt <8 x float> %strided.vec3, splat (float f0xC0FFF644)
  %64 = select <8 x i1> %.inv7, <8 x float> splat (float f0xC0FFF644), <8 x float> %strided.vec3
  %.inv8 = fcmp ogt <8 x float> %64, splat (float f0x40FFF644)
  %65 = select <8 x i1> %.inv8, <8 x float> splat (float f0x40FFF644), <8 x float> %64
  %66 = fmul <8 x float> %65, %65
  %67 = fmul <8 x float> %66, splat (float f0xA59F25C0)
  %68 = fadd <8 x float> %67, splat (float f0x2A61337E)
  %69 = fmul <8 x float> %66, %68
  %70 = fadd <8 x float> %69, splat (float f0xAEBD37FF)
  %71 = fmul <8 x float> %66, %70
  %72 = fadd <8 x float> %71, splat (float f0x335C0041)
  %73 = fmul <8 x float> %66, %72
  %74 = fadd <8 x float> %73, splat (float f0x3779434A)
  %75 = fmul <8 x float> %66, %74
  %76 = fadd <8 x float> %75, splat (float f0x3A270DED)
  %77 = fmul <8 x float> %66, %76
  %78 = fadd <8 x float> %77, splat (float f0x3BA059DC)
  %79 = fmul <8 x float> %65, %78
  %80 = fmul <8 x float> %66, splat (float f0x35A0D3D8)
  %81 = fadd <8 x float> %80, splat (float f0x38F895D6)
  %82 = fmul <8 x float> %66, %81
  %83 = fadd <8 x float> %82, splat (float f0x3B14AA05)
  %84 = fmul <8 x float> %66, %83
  %85 = fadd <8 x float> %84, splat (float f0x3BA059DD)
  %86 = fdiv <8 x float> %79, %85
  %87 = select <8 x i1> %63, <8 x float> %strided.vec3, <8 x float> %86
  %88 = fcmp oge <8 x float> %62, splat (float 2.000000e+01)
  %89 = call <8 x float> @llvm.copysign.v8f32(<8 x float> splat (float 1.000000e+00), <8 x float> %strided.vec3)
  %90 = select <8 x i1> %88, <8 x float> %89, <8 x float> %87
  %91 = fadd reassoc <8 x float> %32, <float 0.000000e+00, float -0.000000e+00, float -0.000000e+00, float -0.000000e+00, float -0.000000e+00, float -0.000000e+00, float -0.000000e+00, float -0.000000e+00>
  %92 = fadd reassoc <8 x float> %91, %61
  %93 = fadd reassoc <8 x float> %92, %90
  %94 = tail call reassoc float @llvm.vector.reduce.fadd.v8f32(float -0.000000e+00, <8 x float> %93)
  %95 = getelementptr inbounds nuw i8, ptr %2, i64 16
  %96 = load ptr, ptr %95, align 8, !invariant.load !8, !dereferenceable !15
  store float %94, ptr %96, align 4, !alias.scope !13, !noalias !10
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite)
declare void @llvm.experimental.noalias.scope.decl(metadata) #1

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare float @llvm.vector.reduce.fadd.v8f32(float, <8 x float>) #2

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare <8 x float> @llvm.fabs.v8f32(<8 x float>) #2

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare <8 x float> @llvm.copysign.v8f32(<8 x float>, <8 x float>) #2

attributes #0 = { uwtable "frame-pointer"="all" "prefer-vector-width"="256" }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite) }
attributes #2 = { nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none) }

!llvm.module.flags = !{!0, !1, !2, !3, !4, !5}
!xla_cpu_memory_region_name = !{!6}
!llvm.ident = !{!7}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 0}
!2 = !{i32 1, !"wchar_size", i32 4}
!3 = !{i32 8, !"PIC Level", i32 0}
!4 = !{i32 7, !"uwtable", i32 2}
!5 = !{i32 7, !"frame-pointer", i32 2}
!6 = !{!"xla_cpu_emitter__loop_fusion_kernel_emitter__hlo_opcode__fusion"}
!7 = !{!"clang version 18.1.8"}
!8 = !{}
!9 = !{i64 96}
!10 = !{!11}
!11 = distinct !{!11, !12, !"tanh_reduce_fusion_wrapped: argument 0"}
!12 = distinct !{!12, !"tanh_reduce_fusion_wrapped"}
!13 = !{!14}
!14 = distinct !{!14, !12, !"tanh_reduce_fusion_wrapped: argument 1"}
!15 = !{i64 4}
