"""Records and their Arrow schemas: the one source of truth for every column trajforge writes."""

from trajforge.schemas.candidate import Candidate, CandidateMeta
from trajforge.schemas.env_profile import EnvProfile
from trajforge.schemas.rejection import Rejection
from trajforge.schemas.task_instance import TaskInstance, Validation
from trajforge.schemas.test_run import TestRun, TestStatus
from trajforge.schemas.trajectory import FunctionCall, Message, ToolCall, Trajectory

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
