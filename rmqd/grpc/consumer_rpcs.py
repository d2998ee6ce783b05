"""What the consumers' RPCs share (:mod:`rmqd.grpc.receive_rpcs`, :mod:`rmqd.grpc.settle_rpcs`): the call checks,
the lookups, the backend's consumer part, Lite Mode and the push consumers' renewals."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqd.grpc.backend import Consuming, LiteService
    from rmqd.grpc.call_checks import CallChecks
    from rmqd.grpc.lookups import Lookups
    from rmqd.grpc.renewals import Renewals


@dataclass
class ConsumerRpcs:
    checks: CallChecks
    lookups: Lookups
    consuming: Consuming
    lite: LiteService
    renewals: Renewals
