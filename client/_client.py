"""HTTP clients for the tilec service: `Client` (sync) and `AsyncClient`, over httpx, typed by the
shared wire models. Refusals become ServiceError (with the server's error code and detail); httpx's
transport errors are translated here, at one boundary.

    TilecError
    └── ServiceError              the service refused (status, code, detail) or could not be reached
        ├── NotFoundError         404: body.missing says what (kernel, artifact, tuning_result, ...)
        ├── AuthError             401/403
        └── ServiceUnavailable    503 or a transport error; retry_after when the server said
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
from pydantic import TypeAdapter

from tilec.wire import (
    KeyPublic,
    ManifestPublic,
    MissCreate,
    MissPublic,
    MissQueuedPublic,
    PinCreate,
    PinPublic,
    RetuneCreate,
    RetunePublic,
    TuneJobCreate,
    TuneJobPublic,
)

from ._exceptions import TilecError
from ._models import (
    ArtifactPublic,
    CompileCreate,
    HealthPublic,
    KernelCreate,
    KernelPublic,
    LookupPublic,
    TokenCreate,
    TokenPublic,
    TrialPublic,
    TuningResultCreate,
    TuningResultPublic,
)

_TOKENS = TypeAdapter(list[TokenPublic])
_JOBS = TypeAdapter(list[TuneJobPublic])
_MISSES = TypeAdapter(list[MissPublic])
_KERNELS = TypeAdapter(list[KernelPublic])
_ARTIFACTS = TypeAdapter(list[ArtifactPublic])
_RESULTS = TypeAdapter(list[LookupPublic])
_TRIALS = TypeAdapter(list[TrialPublic])
_KEYS = TypeAdapter(list[KeyPublic])


class ServiceError(TilecError):
    def __init__(self, status: int, code: str, detail: str, body: dict | None = None) -> None:
        # status 0: no answer at all (connection refused, DNS, timeout), said so rather than "0 unreachable:"
        super().__init__(f"cannot reach the server: {detail}" if status == 0 else f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body or {}


class NotFoundError(ServiceError):
    pass


class AuthError(ServiceError):
    pass


class ServiceUnavailable(ServiceError):
    @property
    def retry_after(self) -> float | None:
        value = self.body.get("retry_after")
        return float(value) if value is not None else None


def _error(response: httpx.Response) -> ServiceError:
    try:
        body = response.json()
    except ValueError:
        body = {"error": "http_error", "detail": response.text[:500]}
    if not isinstance(body, dict):
        body = {"error": "http_error", "detail": str(body)[:500]}
    if "Retry-After" in response.headers:
        body["retry_after"] = response.headers["Retry-After"]
    status, code, detail = response.status_code, str(body.get("error", "")), str(body.get("detail", ""))
    cls = {404: NotFoundError, 401: AuthError, 403: AuthError, 503: ServiceUnavailable}.get(status, ServiceError)
    return cls(status, code, detail, body)


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise _error(response)
    return response


def _verified(response: httpx.Response) -> bytes:
    want = response.headers.get("X-Tilec-SHA256")
    if want and hashlib.sha256(response.content).hexdigest() != want:
        raise ServiceError(response.status_code, "sha_mismatch", "the download does not match its sha256")
    return response.content


def _body(model: Any) -> dict:
    return model.model_dump(mode="json", exclude_none=True)


class _Base:
    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout

    @staticmethod
    def _lookup_params(kernel: str, target: str, key: str, dtypes: str) -> dict[str, str]:
        return {"kernel": kernel, "target": target, "key": key, "dtypes": dtypes}

    @staticmethod
    def _manifest_params(tuning_key: str | None) -> dict[str, str]:
        return {} if tuning_key is None else {"tuning_key": tuning_key}

    @staticmethod
    def _page(kernel: str | None, target: str | None, limit: int, offset: int) -> dict[str, str | int]:
        given = {"kernel": kernel, "target": target, "limit": limit, "offset": offset}
        return {k: v for k, v in given.items() if v is not None}

    @staticmethod
    def _job_filters(state: str | None, kernel: str | None) -> dict[str, str]:
        given = {"state": state, "kernel": kernel}
        return {k: v for k, v in given.items() if v is not None}


class Client(_Base):
    """Blocking client: `Client("http://127.0.0.1:8000", token)`; use as a context manager or close()."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 120.0, transport: Any = None) -> None:
        super().__init__(url, token, timeout)
        self._http = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return _check(self._http.request(method, path, **kw))
        except httpx.TransportError as exc:
            raise ServiceUnavailable(0, "unreachable", str(exc) or type(exc).__name__) from exc

    def health(self) -> HealthPublic:
        return HealthPublic.model_validate_json(self._request("GET", "/healthz").content)

    def submit_kernel(self, body: KernelCreate) -> KernelPublic:
        return KernelPublic.model_validate_json(self._request("POST", "/v1/kernels", json=_body(body)).content)

    def compile(self, body: CompileCreate) -> ArtifactPublic:
        return ArtifactPublic.model_validate_json(self._request("POST", "/v1/compile", json=_body(body)).content)

    def artifact(self, artifact_id: str) -> ArtifactPublic:
        return ArtifactPublic.model_validate_json(self._request("GET", f"/v1/artifacts/{artifact_id}").content)

    def kernel(self, key: str) -> KernelPublic:
        return KernelPublic.model_validate_json(self._request("GET", f"/v1/kernels/{key}").content)

    def kernels(self, *, limit: int = 100, offset: int = 0) -> list[KernelPublic]:
        """A page of kernels, newest first, without their IR."""
        params = self._page(None, None, limit, offset)
        return _KERNELS.validate_json(self._request("GET", "/v1/kernels", params=params).content)

    def artifacts(
        self, *, kernel: str | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[ArtifactPublic]:
        """A page of artifacts (metadata, no bytes), newest first, of one kernel and/or target."""
        params = self._page(kernel, target, limit, offset)
        return _ARTIFACTS.validate_json(self._request("GET", "/v1/artifacts", params=params).content)

    def tuning_results(
        self, *, kernel: str | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[LookupPublic]:
        """A page of tuning results (as lookup answers them), the most recently improved first."""
        params = self._page(kernel, target, limit, offset)
        return _RESULTS.validate_json(self._request("GET", "/v1/tuning-results", params=params).content)

    def trials(self, tuning_key: str) -> list[TrialPublic]:
        """Every trial of a tuning key, best first (an empty list for an unknown key)."""
        return _TRIALS.validate_json(self._request("GET", f"/v1/tuning-results/{tuning_key}/trials").content)

    def download(self, artifact_id: str, form: str) -> bytes:
        return _verified(self._request("GET", f"/v1/artifacts/{artifact_id}/{form}"))

    def manifest(self, artifact_id: str, tuning_key: str | None = None) -> ManifestPublic:
        """The artifact's signed manifest (naming `tuning_key` when it is that result's best build);
        check it with tilec.client._verify.verify before loading the binary."""
        params = self._manifest_params(tuning_key)
        return ManifestPublic.model_validate_json(
            self._request("GET", f"/v1/artifacts/{artifact_id}/manifest", params=params).content
        )

    def keys(self) -> list[KeyPublic]:
        """The public keys the server signs manifests with (pin one in TILEC_TRUSTED_KEYS)."""
        return _KEYS.validate_json(self._request("GET", "/v1/keys").content)

    def lookup(self, kernel: str, target: str, *, key: str = "", dtypes: str = "") -> LookupPublic | None:
        try:
            response = self._request("GET", "/v1/lookup", params=self._lookup_params(kernel, target, key, dtypes))
        except NotFoundError:
            return None
        return LookupPublic.model_validate_json(response.content)

    def record_tuning(self, body: TuningResultCreate) -> TuningResultPublic:
        response = self._request("POST", "/v1/tuning-results", json=_body(body))
        return TuningResultPublic.model_validate_json(response.content)

    def create_token(self, body: TokenCreate) -> TokenPublic:
        return TokenPublic.model_validate_json(self._request("POST", "/v1/tokens", json=_body(body)).content)

    def list_tokens(self) -> list[TokenPublic]:
        return _TOKENS.validate_json(self._request("GET", "/v1/tokens").content)

    def revoke_token(self, token_id: int) -> TokenPublic:
        return TokenPublic.model_validate_json(self._request("DELETE", f"/v1/tokens/{token_id}").content)

    def submit_tune(self, body: TuneJobCreate) -> TuneJobPublic:
        """Queue a tune job (202), or join the one queued or running for the same tuning key."""
        return TuneJobPublic.model_validate_json(self._request("POST", "/v1/tune-jobs", json=_body(body)).content)

    def tune_job(self, job_id: int) -> TuneJobPublic:
        return TuneJobPublic.model_validate_json(self._request("GET", f"/v1/tune-jobs/{job_id}").content)

    def tune_jobs(self, state: str | None = None, kernel: str | None = None) -> list[TuneJobPublic]:
        response = self._request("GET", "/v1/tune-jobs", params=self._job_filters(state, kernel))
        return _JOBS.validate_json(response.content)

    def cancel_tune(self, job_id: int) -> TuneJobPublic:
        return TuneJobPublic.model_validate_json(self._request("POST", f"/v1/tune-jobs/{job_id}/cancel").content)

    # zero compiles in production (issue 27)

    def report_miss(self, body: MissCreate) -> MissPublic:
        """Tell the server a launch would compile or tune in its process (a read token suffices)."""
        return MissPublic.model_validate_json(self._request("POST", "/v1/misses", json=_body(body)).content)

    def misses(self, target: str | None = None) -> list[MissPublic]:
        params = {"target": target} if target else {}
        return _MISSES.validate_json(self._request("GET", "/v1/misses", params=params).content)

    def queue_miss(self, miss_id: int) -> MissQueuedPublic:
        """Have the server build (a compile miss) or tune (a tune miss) what a miss lacked (submit scope)."""
        response = self._request("POST", f"/v1/misses/{miss_id}/queue")
        return MissQueuedPublic.model_validate_json(response.content)

    def pin(self, tuning_key: str, body: PinCreate) -> PinPublic:
        """Pin a config for a tuning key (admin scope): lookups and pulls then serve it, marked pinned."""
        response = self._request("PUT", f"/v1/tuning-results/{tuning_key}/pin", json=_body(body))
        return PinPublic.model_validate_json(response.content)

    def unpin(self, tuning_key: str) -> None:
        self._request("DELETE", f"/v1/tuning-results/{tuning_key}/pin")

    def retune(self, body: RetuneCreate) -> RetunePublic:
        """Queue tune jobs for the inventory (submit scope): every tuning key held for the target."""
        return RetunePublic.model_validate_json(self._request("POST", "/v1/retune", json=_body(body)).content)


class AsyncClient(_Base):
    """The same API as Client, awaitable."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 120.0, transport: Any = None) -> None:
        super().__init__(url, token, timeout)
        self._http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return _check(await self._http.request(method, path, **kw))
        except httpx.TransportError as exc:
            raise ServiceUnavailable(0, "unreachable", str(exc) or type(exc).__name__) from exc

    async def health(self) -> HealthPublic:
        return HealthPublic.model_validate_json((await self._request("GET", "/healthz")).content)

    async def submit_kernel(self, body: KernelCreate) -> KernelPublic:
        response = await self._request("POST", "/v1/kernels", json=_body(body))
        return KernelPublic.model_validate_json(response.content)

    async def compile(self, body: CompileCreate) -> ArtifactPublic:
        response = await self._request("POST", "/v1/compile", json=_body(body))
        return ArtifactPublic.model_validate_json(response.content)

    async def artifact(self, artifact_id: str) -> ArtifactPublic:
        response = await self._request("GET", f"/v1/artifacts/{artifact_id}")
        return ArtifactPublic.model_validate_json(response.content)

    async def kernel(self, key: str) -> KernelPublic:
        return KernelPublic.model_validate_json((await self._request("GET", f"/v1/kernels/{key}")).content)

    async def kernels(self, *, limit: int = 100, offset: int = 0) -> list[KernelPublic]:
        params = self._page(None, None, limit, offset)
        return _KERNELS.validate_json((await self._request("GET", "/v1/kernels", params=params)).content)

    async def artifacts(
        self, *, kernel: str | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[ArtifactPublic]:
        params = self._page(kernel, target, limit, offset)
        return _ARTIFACTS.validate_json((await self._request("GET", "/v1/artifacts", params=params)).content)

    async def tuning_results(
        self, *, kernel: str | None = None, target: str | None = None, limit: int = 100, offset: int = 0
    ) -> list[LookupPublic]:
        params = self._page(kernel, target, limit, offset)
        return _RESULTS.validate_json((await self._request("GET", "/v1/tuning-results", params=params)).content)

    async def trials(self, tuning_key: str) -> list[TrialPublic]:
        response = await self._request("GET", f"/v1/tuning-results/{tuning_key}/trials")
        return _TRIALS.validate_json(response.content)

    async def download(self, artifact_id: str, form: str) -> bytes:
        return _verified(await self._request("GET", f"/v1/artifacts/{artifact_id}/{form}"))

    async def manifest(self, artifact_id: str, tuning_key: str | None = None) -> ManifestPublic:
        params = self._manifest_params(tuning_key)
        response = await self._request("GET", f"/v1/artifacts/{artifact_id}/manifest", params=params)
        return ManifestPublic.model_validate_json(response.content)

    async def keys(self) -> list[KeyPublic]:
        return _KEYS.validate_json((await self._request("GET", "/v1/keys")).content)

    async def lookup(self, kernel: str, target: str, *, key: str = "", dtypes: str = "") -> LookupPublic | None:
        try:
            response = await self._request(
                "GET", "/v1/lookup", params=self._lookup_params(kernel, target, key, dtypes)
            )
        except NotFoundError:
            return None
        return LookupPublic.model_validate_json(response.content)

    async def record_tuning(self, body: TuningResultCreate) -> TuningResultPublic:
        response = await self._request("POST", "/v1/tuning-results", json=_body(body))
        return TuningResultPublic.model_validate_json(response.content)

    async def create_token(self, body: TokenCreate) -> TokenPublic:
        response = await self._request("POST", "/v1/tokens", json=_body(body))
        return TokenPublic.model_validate_json(response.content)

    async def list_tokens(self) -> list[TokenPublic]:
        return _TOKENS.validate_json((await self._request("GET", "/v1/tokens")).content)

    async def revoke_token(self, token_id: int) -> TokenPublic:
        return TokenPublic.model_validate_json((await self._request("DELETE", f"/v1/tokens/{token_id}")).content)

    async def submit_tune(self, body: TuneJobCreate) -> TuneJobPublic:
        response = await self._request("POST", "/v1/tune-jobs", json=_body(body))
        return TuneJobPublic.model_validate_json(response.content)

    async def tune_job(self, job_id: int) -> TuneJobPublic:
        return TuneJobPublic.model_validate_json((await self._request("GET", f"/v1/tune-jobs/{job_id}")).content)

    async def tune_jobs(self, state: str | None = None, kernel: str | None = None) -> list[TuneJobPublic]:
        response = await self._request("GET", "/v1/tune-jobs", params=self._job_filters(state, kernel))
        return _JOBS.validate_json(response.content)

    async def cancel_tune(self, job_id: int) -> TuneJobPublic:
        response = await self._request("POST", f"/v1/tune-jobs/{job_id}/cancel")
        return TuneJobPublic.model_validate_json(response.content)
