"""The torch probe's unit: its key facts (torch, CUDA, arch list, GPU0 arch supported)."""
