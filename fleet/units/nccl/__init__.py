"""The nccl probe's unit: its key facts (NCCL versions, NCCL_* set)."""
