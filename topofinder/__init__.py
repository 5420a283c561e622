"""topofinder: topology/schedule co-design search for direct-connect fabrics."""

from topofinder.errors import TopofinderError
from topofinder.model.topology import Topology

__all__ = ["Topology", "TopofinderError"]
__version__ = "0.1.0"
