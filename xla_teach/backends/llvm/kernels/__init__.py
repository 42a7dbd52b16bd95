"""Kernels both backends emit the same way: the sequential ones (select-and-scatter, a variadic
scatter, the legacy rng's state) and the rng-bit-generator loop of the CPU."""
