"""Stand-in for ``streaming.base.shared``: the shared-memory coordination primitives."""

from streaming.base.shared.array import SharedArray
from streaming.base.shared.barrier import SharedBarrier
from streaming.base.shared.memory import SharedMemory
from streaming.base.shared.prefix import get_shm_prefix

__all__ = ['SharedArray', 'SharedBarrier', 'SharedMemory', 'get_shm_prefix']
