"""Sharing an experiment's grid among K processes (docs/distributed.md, "The experiments' grids").

The grid scripts (dpsgd_grid.py, dpsgd_networks_grid.py, fim_tables.py) hand their units of work
(a setting; a setting's run; a setting's seed and method) to K processes round robin in the order the script lists
them: process r of K takes units r, r + K, r + 2K, ... Each unit writes its own result files, which
filkit writes atomically (a temporary file renamed into place), and a unit whose files exist is not
run again, so the processes together write exactly what one process would, in any order, and an
interrupted grid resumes where it stopped. The tables over the whole grid are written by whichever
process finds every unit's files present when it is done (the last to finish; a rerun of any rank
or of the whole grid writes them again, from the same files, to the same bytes).

Which process this is: --rank R --ranks K; else Open MPI's OMPI_COMM_WORLD_RANK and _SIZE (started
as `mpirun -np K python3 script.py ...`: K copies of the script, one a rank, each running filkit on
one process); else a Slurm job array's SLURM_ARRAY_TASK_ID, _MIN and _COUNT; else 0 of 1.
--dry-run lists this process's units without running them.
"""
import os


def add_arguments(parser):
    """--rank, --ranks and --dry-run on an argparse parser."""
    parser.add_argument("--rank", type=int, help="this process's share: units rank, rank + ranks, ... (default: "
                        "OMPI_COMM_WORLD_RANK, SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, else 0)")
    parser.add_argument("--ranks", type=int, help="processes sharing the grid (default: OMPI_COMM_WORLD_SIZE, "
                        "SLURM_ARRAY_TASK_COUNT, else 1)")
    parser.add_argument("--dry-run", action="store_true", help="list this process's units, run nothing")


def rank_of(args, parser):
    """(rank, ranks) of this process: the flags, else Open MPI's or Slurm's environment, else (0, 1)."""
    environ = os.environ
    rank, ranks = args.rank, args.ranks
    if rank is None and ranks is None:
        if "OMPI_COMM_WORLD_RANK" in environ:
            rank, ranks = int(environ["OMPI_COMM_WORLD_RANK"]), int(environ["OMPI_COMM_WORLD_SIZE"])
        elif "SLURM_ARRAY_TASK_ID" in environ:
            rank = int(environ["SLURM_ARRAY_TASK_ID"]) - int(environ.get("SLURM_ARRAY_TASK_MIN", "0"))
            ranks = int(environ["SLURM_ARRAY_TASK_COUNT"])
        else:
            rank, ranks = 0, 1
    if rank is None or ranks is None:
        parser.error("--rank and --ranks go together")
    if ranks < 1 or not 0 <= rank < ranks:
        parser.error(f"--rank {rank} --ranks {ranks}: ranks must be at least 1 and rank in 0 .. ranks - 1")
    return rank, ranks


class Share:
    """Which units this process takes: the k-th distinct unit key met is taken by process k mod ranks
    (a key met again, a run shared by two tables, keeps its first number)."""

    def __init__(self, rank, ranks):
        self.rank, self.ranks = rank, ranks
        self.numbers = {}

    def takes(self, key):
        number = self.numbers.setdefault(key, len(self.numbers))
        return number % self.ranks == self.rank
