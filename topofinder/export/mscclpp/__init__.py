"""MSCCL++ execution plans: parser, limits and execution model (see :mod:`.plan_model`)."""

from .plan_model import PlanReport, check_plan

__all__ = ["PlanReport", "check_plan"]
