"""Stage 2: fusion planning. Entry function: ``plan_graph(graph) -> Plan``."""
from .plan import Kernel, Plan, Store, plan_graph

__all__ = ["plan_graph", "Plan", "Kernel", "Store"]
