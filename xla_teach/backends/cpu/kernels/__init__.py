"""CPU kernel emitters, one module per kind of kernel (loop, reduction, dot, sort, ...)."""
