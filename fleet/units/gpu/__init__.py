"""The gpu probe's unit: its key facts (driver, CUDA, GPUs, compute capability, interconnect)."""
