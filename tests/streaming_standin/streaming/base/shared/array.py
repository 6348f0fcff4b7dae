"""A fixed-length array of int32 in shared memory (stand-in for ``streaming.base.shared.array``).

Only what the barrier needs: ``SharedArray(length, 'i', name)`` creates the segment, or attaches to
it if it exists (one tick later, whatever size it has by then).
"""

import struct

from streaming.base.shared.memory import SharedMemory


class SharedArray:
    """``length`` values of one struct format (``'i'``: int32) in a named segment.

    Args:
        length (int): Number of values.
        fmt (str): A ``struct`` format character; the original takes a numpy dtype.
        name (str): Short shm name.
    """

    def __init__(self, length: int, fmt: str, name: str) -> None:
        self._fmt = '=' + fmt
        self._item = struct.calcsize(self._fmt)
        self.length = length
        self.shm = SharedMemory(name, None, length * self._item)

    def __len__(self) -> int:
        return self.length

    def _offset(self, index: int) -> int:
        if not 0 <= index < self.length:
            raise IndexError(index)
        return index * self._item

    def __getitem__(self, index: int) -> int:
        return struct.unpack_from(self._fmt, self.shm.buf, self._offset(index))[0]

    def __setitem__(self, index: int, value: int) -> None:
        struct.pack_into(self._fmt, self.shm.buf, self._offset(index), value)
