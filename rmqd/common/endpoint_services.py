"""The process an endpoint joins (``rmqd.runtime.services.Services``), as the endpoints read it: the broker of this
process, if it has one (each endpoint names the narrow interface it reads the broker by), and whether it is up."""
from __future__ import annotations

from typing import Optional, Protocol, TypeVar

B_co = TypeVar("B_co", covariant=True)


class EndpointServices(Protocol[B_co]):
    @property
    def broker(self) -> Optional[B_co]: ...

    def ready(self) -> bool:
        """True once the process's name server and broker are up (and until they stop)."""
        ...
