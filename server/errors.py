"""The service's refusals: error codes and messages shared by the routes and the tests.

Every refusal is an ApiError, rendered as `{"error": code, "detail": message, ...}` with a 4xx/503 status.
"""

from __future__ import annotations

from typing import Any

from tilec.wire import MSG_INT_AS_FLOAT, MSG_TEXT_NUL, MSG_TEXT_SURROGATE  # noqa: F401 - refusals of the wire rule

# codes
BAD_REQUEST = "bad_request"
INVALID_REQUEST = "invalid_request"
NOT_FOUND = "not_found"
UNAUTHORIZED = "unauthorized"
FORBIDDEN = "forbidden"
BODY_TOO_LARGE = "body_too_large"
SOURCE_TOO_LARGE = "source_too_large"
COMPILE_ERROR = "compile_error"
COMPILE_TIMEOUT = "compile_timeout"
COMPILE_MEMORY = "compile_memory"
COMPILE_FAILED = "compile_failed"
NOT_AVAILABLE = "not_available"
TOO_MANY_CONFIGS = "too_many_configs"
TOO_MANY_TRIALS = "too_many_trials"
BAD_TARGET = "bad_target"
UNKNOWN_ARTIFACT = "unknown_artifact"
ARTIFACT_MISMATCH = "artifact_mismatch"
DB_UNAVAILABLE = "database_unavailable"
OVERLOADED = "overloaded"
VALUE_REFUSED = "value_refused"
METHOD_NOT_ALLOWED = "method_not_allowed"
INTERNAL = "internal"
BAD_LAUNCH = "bad_launch"
NO_WORKER = "no_worker"
BROKER_UNAVAILABLE = "broker_unavailable"
TUNING_KEY_MISMATCH = "tuning_key_mismatch"
HOST_NOT_ALLOWED = "host_not_allowed"
BODY_TIMEOUT = "body_timeout"
TOO_MANY_COMPILES = "too_many_compiles"
TOO_MANY_JOBS = "too_many_jobs"
TOO_MANY_MISSES = "too_many_misses"
NOT_QUEUEABLE = "not_queueable"

# messages
MSG_MISSING_TOKEN = "a bearer token is required"
MSG_BAD_TOKEN = "the bearer token is not valid"
MSG_MISSING_SCOPE = "the token lacks the {scope!r} scope"
MSG_BODY_TOO_LARGE = "the request body is over {limit} bytes"
MSG_HOST_NOT_ALLOWED = (
    "Host {host!r} is not a name this service answers to (the bound address, or one in TILEC_ALLOWED_HOSTS); "
    "refused so that a web page cannot reach it by rebinding its DNS name"
)
MSG_BODY_TIMEOUT = "the request body did not arrive within {limit} s"
MSG_TOO_MANY_COMPILES = "this token already has {limit} compiles running; retry when one has finished"
MSG_TOO_MANY_JOBS = "this token already has {limit} tune jobs queued or running; retry when one has finished"
MSG_COMPILE_NEEDS_SUBMIT = (
    "{what}: that takes a compile, and compiles need the 'submit' scope "
    "(one request with a submit token does it, for everyone)"
)
MSG_MUST_REBUILD = "artifact {id} no longer matches its sha256 or cannot be read, and must be rebuilt"
MSG_MUST_RECOMPUTE_PASSES = "artifact {id} was stored without its per-pass IR, which must be recomputed"
MSG_SOURCE_TOO_LARGE = "the source is over {limit} bytes"
MSG_TOO_MANY_CONFIGS = "{n} configs is over the limit of {limit}"
MSG_TOO_MANY_TRIALS = "{n} trials is over the limit of {limit}"
MSG_ONE_INPUT = "give exactly one of kernel_key, source, ir or bundle"
MSG_VALUE_REFUSED = "the database refused a value of this request: {reason}"
MSG_BODY_NOT_JSON = "the body is not JSON that can be read: {reason}"
MSG_KERNEL_NAME_TOO_LONG = "the kernel's name is longer than {limit} characters"
MSG_KERNEL_NOT_FOUND = "no kernel with key {key}"
MSG_TOKEN_NOT_FOUND = "no token {id}"
MSG_ARTIFACT_NOT_FOUND = "no artifact {id}"
MSG_TUNING_RESULT_NOT_FOUND = "no tuning result {tkey}"
MSG_UI_FILE_NOT_FOUND = "the web page has no file {name}"
MSG_TRIAL_ARTIFACT_NOT_FOUND = "trial {index}: no artifact {id}"
MSG_TRIAL_ARTIFACT_OTHER_KERNEL = "trial {index}: artifact {id} is a build of kernel {other}, not of {kernel}"
MSG_TRIAL_ARTIFACT_OTHER_TARGET = "trial {index}: artifact {id} was built for target {other}, not for {target}"
MSG_TRIAL_ARTIFACT_OTHER_CONFIG = (
    "trial {index}: artifact {id} was built with {param}={built}, but the trial's config has {param}={wanted}"
)
MSG_TRIAL_ARTIFACT_UNREADABLE = "trial {index}: the stored artifact {id} cannot be read; compile it again first"
MSG_FORM_NOT_FOUND = "artifact {id} has no {form}"
MSG_NO_TUNING_RESULT = "no tuning result for kernel {kernel}, key {key!r}, dtypes {dtypes!r}, target {target}"
MSG_COMPILE_TIMEOUT = "the compile took longer than {limit} s and was stopped"
MSG_COMPILE_MEMORY = "the compile went over the memory limit of {limit} MB and was stopped"
MSG_COMPILE_CRASHED = "the compile process died ({reason})"
MSG_REBUILD_FAILED = "artifact {id} no longer matches its sha256 or cannot be read, and could not be rebuilt; retry later"
MSG_DB_UNAVAILABLE = "the database is unavailable; retry later"
MSG_OVERLOADED = "the service is busy: no database connection came free in {wait} s; retry after the pause it gives"
MSG_NOT_FOUND = "not found"
MSG_INTERNAL = "internal error"
MSG_TUNE_NEEDS_SOURCE = "tune jobs take Triton-language source (or the key of a kernel submitted as source), not tile IR"
MSG_NO_WORKER = (
    "this service tunes in-process and can run {here}, not {target}; for other targets set TILEC_BROKER_URL "
    "and start `tilec worker --target {target}` on a machine that has one"
)
MSG_BROKER_UNAVAILABLE = "the job broker is unavailable ({reason}); the job was not accepted, retry later"
MSG_JOB_NOT_FOUND = "no tune job {id}"
MSG_MISS_NOT_FOUND = "no miss {id}"
MSG_TOO_MANY_MISSES = "the server keeps {limit} misses and has them all; this new one is not kept"
MSG_MISS_NO_LAUNCH = (
    "miss {id} is a tune its client could not describe as a launch (its grid is not an expression of its "
    "arguments): tune it with `tilec tune` and a launch description, or from a process that can reach the server"
)
MSG_MISS_BAD_SPEC = "specialisation: {reason}"
MSG_NO_RESULT_TO_PIN = "no tuning result {key}: a pin is set on a key the server holds (tilec ls tuning)"
MSG_NO_PIN = "tuning key {key} has no pin"
MSG_TUNING_KEY_FORM = "a tuning key is 64 hexadecimal digits"
MSG_KERNEL_KEY_FORM = "kernel_key: a kernel key is 64 hexadecimal digits"
MSG_QUERY_REPEATED = "query parameter {name!r} is given more than once"
MSG_MANIFEST_NO_RESULT = "tuning_key: no tuning result {tkey}, so artifact {id} cannot be vouched for as its best"
MSG_MANIFEST_OTHER_ARTIFACT = "tuning_key: the best config of tuning result {tkey} is artifact {linked}, not {id}"
MSG_MANIFEST_NO_BUILD = "tuning_key: the best config of tuning result {tkey} has no stored build, so it is not {id}"


class ApiError(Exception):
    """A refusal with an HTTP status, an error code, a message and optional extra JSON fields."""

    def __init__(
        self, status: int, code: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}
