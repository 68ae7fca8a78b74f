"""Records and their Arrow schemas: the one source of truth for every column trajforge writes."""

from schemas.candidate import Candidate, CandidateMeta
from schemas.env_profile import EnvProfile
from schemas.rejection import Rejection
from schemas.task_instance import TaskInstance, Validation
from schemas.test_run import TestRun, TestStatus
from schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory

__all__ = [
    "Candidate",
    "CandidateMeta",
    "EnvProfile",
    "FunctionCall",
    "Message",
    "Rejection",
    "TaskInstance",
    "TestRun",
    "TestStatus",
    "ToolCall",
    "Trajectory",
    "Validation",
]
