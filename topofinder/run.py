"""``python -m topofinder.run SCHEDULE.json ...``: the MPI executor (see
:mod:`topofinder.execute.mpi`); start it with ``mpiexec -n N``."""

import sys

from topofinder.execute.mpi import main

if __name__ == "__main__":
    sys.exit(main())
