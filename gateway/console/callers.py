"""The callers an admin's try (`gateway.console.try_`) can stand in for, one name per wing; apart
from try_ so that `kbgate`'s argument parser names them without importing every wing."""

CALLERS = ("volcengine", "knowledge", "tools", "dify", "mcp")
