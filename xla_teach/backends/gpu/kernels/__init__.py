"""GPU kernel emitters: loops, reductions (warp shuffles + shared memory), tiled dot."""
