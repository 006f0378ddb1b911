"""What kernels stand on: `PortableTensor`, the ATen-mode device tensors, `KernelRuntimeContext` and `Error`."""
