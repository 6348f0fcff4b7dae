"""Where this process sits: node, rank, dataloader worker (stand-in for ``streaming.base.world``).

Like the original, the world comes from the launcher's environment when no process group is
initialised: ``RANK`` (default 0), ``WORLD_SIZE`` (default 1) and ``LOCAL_WORLD_SIZE`` (default 1).
Kept flaw: a launcher that does not set ``LOCAL_WORLD_SIZE`` gets one rank per node, so every rank
is its node's rank 0 and therefore a local leader. A wrong value is trusted just the same.
"""

import os
import sys


def _env_int(key: str, default: int) -> int:
    value = os.environ.get(key)
    return default if value is None or value == '' else int(value)


def _worker_info():
    """torch's DataLoader worker info in a DataLoader worker, else None. torch is only asked when it is
    already imported: a DataLoader worker always has it, and a rank without loader workers never pays
    for the import."""
    if 'torch' not in sys.modules:
        return None
    from torch.utils.data import get_worker_info  # pylint: disable=import-outside-toplevel
    return get_worker_info()


class World:
    """Node / rank / worker coordinates of one process.

    Args:
        num_nodes (int): Number of nodes.
        ranks_per_node (int): Ranks on each node (the launcher's local world size).
        workers_per_rank (int): Dataloader workers per rank.
        worker (int): Global index of this worker.
    """

    def __init__(self, num_nodes: int, ranks_per_node: int, workers_per_rank: int, worker: int) -> None:
        self.num_nodes = num_nodes
        self.ranks_per_node = ranks_per_node
        self.workers_per_rank = workers_per_rank
        self.worker = worker

        self.num_ranks = num_nodes * ranks_per_node
        self.workers_per_node = ranks_per_node * workers_per_rank
        self.num_workers = self.num_ranks * workers_per_rank

        self.rank = worker // workers_per_rank
        self.worker_of_rank = worker % workers_per_rank
        self.node = self.rank // ranks_per_node
        self.rank_of_node = self.rank % ranks_per_node
        self.worker_of_node = worker % self.workers_per_node

        self.is_multinode = num_nodes > 1
        self.is_leader = worker == 0
        self.is_local_leader = self.worker_of_node == 0

    @classmethod
    def detect(cls) -> 'World':
        """Read the launcher's environment and, inside a DataLoader worker, torch's worker info (as the
        original does: ``workers_per_node`` is then ranks per node x DataLoader workers).

        Returns:
            World: This process's coordinates.
        """
        rank = _env_int('RANK', 0)
        world_size = _env_int('WORLD_SIZE', 1)
        ranks_per_node = _env_int('LOCAL_WORLD_SIZE', 1)  # missing => 1 => everyone leads
        num_nodes = world_size // ranks_per_node
        workers_per_rank = 1
        worker_of_rank = 0
        info = _worker_info()
        if info is not None:
            workers_per_rank = info.num_workers
            worker_of_rank = info.id
        return cls(num_nodes, ranks_per_node, workers_per_rank, rank * workers_per_rank + worker_of_rank)

    def __repr__(self) -> str:
        return (f'World(rank={self.rank}, num_ranks={self.num_ranks}, ranks_per_node={self.ranks_per_node}, '
                f'rank_of_node={self.rank_of_node}, is_local_leader={self.is_local_leader})')
