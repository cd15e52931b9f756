"""One exception class per rime StatusCode (include/rime/status.hpp), raised by every call that fails."""


class RimeError(Exception):
    """A failed rime call: `code` (the StatusCode's name), `message`, and `location` (a JSON pointer into the
    graph document, e.g. "/tensors/1/dims", when the error is about one field; else empty)."""

    code = "Internal"

    def __init__(self, message, location=""):
        super().__init__(f"{self.code} at {location}: {message}" if location else f"{self.code}: {message}")
        self.message = message
        self.location = location


class InvalidGraphError(RimeError):
    """The graph breaks a rule (SPEC sections 1, 5, 6)."""
    code = "InvalidGraph"


class InvalidJsonError(RimeError):
    """The document is not a well-formed graph (or plan artifact)."""
    code = "InvalidJson"


class NotSupportedError(RimeError):
    """A valid graph that no capability row serves. `reasons`: every row's, one line each."""
    code = "NotSupported"

    @property
    def reasons(self):
        return [line.strip() for line in self.message.splitlines()[1:] if line.strip()]


class CompileFailedError(RimeError):
    """NVRTC rejected a kernel: the message carries the log and the kernel's name."""
    code = "CompileFailed"


class CacheCorruptError(RimeError):
    """A plan-cache entry or plan artifact failed its checks."""
    code = "CacheCorrupt"


class CudaError(RimeError):
    """The CUDA driver failed, or there is no GPU where one is needed."""
    code = "CudaError"


class InternalError(RimeError):
    """A bug in rime."""
    code = "Internal"


class InvalidArgumentError(RimeError):
    """An argument other than the graph is wrong (a buffer, an arch, an option)."""
    code = "InvalidArgument"


class PlanNotReadyError(InvalidArgumentError):
    """A torch op met a shape with no plan while its stream was capturing a CUDA graph, where a plan cannot be made
    (it may compile). The message names the op and the shape; rime.torch.warmup(...) or one eager call before the
    capture makes the plan."""


_BY_CODE = {cls.code: cls for cls in (InvalidGraphError, InvalidJsonError, NotSupportedError, CompileFailedError,
                                      CacheCorruptError, CudaError, InternalError, InvalidArgumentError)}


def from_status(code, message, location):
    """The exception of a Status (called by the extension module)."""
    return _BY_CODE.get(code, InternalError)(message, location)
