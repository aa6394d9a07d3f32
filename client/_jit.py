"""`client.jit`: a Triton-language kernel made launchable as `kernel[grid](*args, **constexprs)`.

Each call binds arguments to parameters, specialises (dtypes, constexprs, hints) and reuses the compiled
artifact for that specialisation from an in-memory cache. Autotuned kernels time their configs on the
actual arguments (restoring every array between trials; on cuda with CUDA events as Triton's do_bench)
and keep the winner per autotune key; a warm launch of either kind is a FastPath hit
(runtime/cuda.py). With a server (`jit(..., server=)` or TILEC_URL), an autotuned kernel reads the
shared tuning result first and only tunes on a miss, then publishes what it measured: every rank of a job launches the same config.

With a server (client/_shared.py), every build (a plain kernel's specialisation, an autotuned kernel's chosen config) comes
from the local disk cache when it holds it (no network call), else from the server (POST /v1/compile, or
the tuning result's own build), its signed manifest and binary verified before the runtime sees them and
then kept in the local cache. A server that cannot be reached or may not compile (a read-only token)
leaves the build to this process, as without one; a build that fails verification is an error.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tilec.compiler.artifact import Artifact, CompileOptions
from tilec.compiler.errors import OutOfResourcesError, StaticAssertionError
from tilec.compiler.pipeline import compile_request
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune.keys import tuning_key
from tilec.runtime.grid import check_grid
from tilec.runtime.launch import ArgSpec, BF16Array, host_view, launch, select_target, specialise

from . import _pulled, _record, _strict
from ._exceptions import ArchMismatchError, ArgumentError
from ._index import key_value as _key_value
from ._shared import LAUNCH_OPTIONS as _LAUNCH_OPTIONS
from ._shared import ServerBuilds, SharedResults, _config
from ._trials import snapshot, time_config, zero_arrays


def _read_source(source_or_path: str | os.PathLike) -> tuple[str, str]:
    """Source text, or a path to a file (a PathLike, or one line that names a .py file or has a slash):
    a path that does not exist is a FileNotFoundError, not source with a syntax error."""
    text = os.fspath(source_or_path)
    if isinstance(source_or_path, os.PathLike) or ("\n" not in text and len(text) < 4096 and (
            text.endswith(".py") or os.sep in text or Path(text).is_file())):  # fmt: skip
        path = Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"no kernel file at {text}")
        return path.read_text(), text
    return text, "<source>"


class JITKernel:
    """A kernel read from source; index it with a grid to launch."""

    _tilec_jit = True  # client/_resolve.py: a jit function's wrapper (its `fn`, when made from one)

    def __init__(
        self, source_or_path: str | os.PathLike | None, name: str | None = None, *, server: Any = None,
        trusted_keys: Any = None, cache: Any = None, bundle: Any = None,
    ) -> None:  # fmt: skip
        """`server`: a Client or a URL that builds and shares (None: none); `trusted_keys`: TrustedKeys or
        their text (None: TILEC_TRUSTED_KEYS); `cache`: a LocalCache or its directory (None: the default);
        `bundle`: a kernel bundle (compiler/frontend/bundle.py) instead of source, as the resolver makes."""
        from tilec.compiler.frontend import read_kernel

        self.fn: Any = None  # the Python function, when made by @tilec.jit
        self.host_heuristics: dict[str, Callable] = {}  # @tilec.heuristics: parameter -> fn(args)
        self.host_autotune: Any = None  # @tilec.autotune (client/_decorators.py HostAutotune)
        self.debug = False  # CompileOptions.debug: cuda checks device asserts (the drop-in: TRITON_DEBUG=1)
        if bundle is not None:
            self._set_bundle(bundle)
        else:
            self.kind = "source"
            self.source, filename = _read_source(source_or_path)
            self.ks = read_kernel(self.source, name, filename=filename)
        self.name = self.ks.name
        self.params = self.ks.params
        self._param_names = [p.name for p in self.params]
        self._runtime_params = frozenset(p.name for p in self.params if not p.constexpr)
        self.cache: dict[tuple, Artifact] = {}
        self.best_configs: dict[tuple, Any] = {}
        self.compile_count = 0  # artifacts this kernel obtained: compiled here, read from disk or fetched
        self.obtained = {"here": 0, "disk": 0, "server": 0}  # ... and where from (disk: a pulled index too)
        self.trials: dict[tuple, list[tuple[dict, float]]] = {}
        self.shared = SharedResults(server) if server is not None else None
        self.builds = ServerBuilds(self.shared, trusted_keys, cache) if self.shared is not None else None
        self._cache_given = cache  # the local cache (a LocalCache, its directory, or None: TILEC_CACHE_DIR)
        # tuning key -> (its parts as the service has them, the server's lookup answer)
        self._tuned: dict[tuple, tuple[dict, Any]] = {}
        self._where: dict[tuple, dict[str, str]] = {}  # tuning key -> its parts as the service has them
        self._launches: dict[tuple, dict | None] = {}  # tuning key -> a tune job's launch description
        self._tuning = False  # a local tune's trials build here: the tune was the miss, not each trial
        self._recorded: set[tuple] = set()  # specialisations written to the record (TILEC_RECORD)

    def _set_bundle(self, bundle: Any) -> None:
        from tilec.compiler.frontend.bundle import bundle_json, read_bundle

        self.kind = "bundle"
        self.bundle = bundle
        self.source = bundle_json(bundle)  # what compiles and keys carry
        self.ks = read_bundle(bundle)

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    # ---- binding -----------------------------------------------------------------------------------

    def bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
        """Parameter name -> value (given ones only), and the launch options found in kwargs."""
        if len(args) > len(self.params):
            raise ArgumentError(f"{self.name} takes {len(self.params)} arguments, got {len(args)} positional")
        bound = {p.name: a for p, a in zip(self.params, args, strict=False)}
        names = {p.name for p in self.params}
        options = {}
        for k, v in kwargs.items():
            if k in _LAUNCH_OPTIONS:
                options[k] = v
                if k not in names:
                    continue  # as in Triton, a parameter of the same name gets the value too
            if k not in names:
                raise ArgumentError(f"{self.name} has no parameter '{k}'")
            elif k in bound:
                raise ArgumentError(f"argument '{k}' given twice")
            else:
                bound[k] = v
        return bound, options

    def complete(self, bound: dict[str, Any]) -> dict[str, Any]:
        """Fill heuristics and defaults; every parameter must end with a value."""
        from tilec.compiler.frontend.literal import evaluate_heuristic

        full = dict(bound)
        for p in self.params:
            if p.name not in full and p.has_default:
                full[p.name] = p.default
        for pname, text in self.ks.heuristics.items():
            if pname not in bound:
                full[pname] = evaluate_heuristic(text, full)
        for pname, fn in self.host_heuristics.items():  # in order, each sees those before it, as in Triton
            if pname not in bound:
                full[pname] = fn(full)
        missing = [p.name for p in self.params if p.name not in full]
        if missing:
            raise ArgumentError(f"{self.name} is missing argument(s) {', '.join(repr(m) for m in missing)}")
        return full

    # ---- compile -----------------------------------------------------------------------------------

    def specialisation(self, full: dict[str, Any]) -> tuple[dict[str, ArgSpec], dict[str, Any]]:
        specs, constexprs = {}, {}
        for p in self.params:
            if p.constexpr or full[p.name] is None:  # Triton: a None argument is the constexpr None
                constexprs[p.name] = constexpr_value(full[p.name])
            else:
                specs[p.name] = specialise(p.name, full[p.name])
        return specs, constexprs

    def runtime_names(self, full: dict[str, Any]) -> list[str]:
        """The parameters passed at launch: not constexpr, and not None (None specialises as a constant)."""
        return [p.name for p in self.params if not p.constexpr and full[p.name] is not None]

    def artifact(self, full: dict[str, Any], options: CompileOptions, *, config: Any = None, remote: bool = True,
                 tuned: tuple[dict, Any] | None = None, where: dict | None = None) -> Artifact:  # fmt: skip
        """The artifact for this specialisation: from memory, else (unless `remote` is False) a pulled index
        (TILEC_INDEX), else (with a server) the local disk cache or the server, else (without one) the local
        build cache, else compiled here (a miss: client/_strict.py; kept in the local build cache). `config`:
        the autotune config whose kwargs are among the constexprs; `tuned`: the shared tuning key's parts and
        its result's build; `where`: the tuning key's parts (for the record)."""
        specs, constexprs = self.specialisation(full)
        key = (
            tuple(sorted(specs.items())),
            tuple(sorted((k, repr(v)) for k, v in constexprs.items())),
            options,
        )
        art = self.cache.get(key)
        if art is None:
            build = self._build(specs, constexprs, options, config) if remote and not options.debug else None
            art, source = self._obtain(build, tuned)
            local = self._local_builds() if build is not None and self.builds is None else None
            if art is None and local is not None:
                art = local.get(build, options)
                source = "disk" if art is not None else source
            if art is None:
                signature = {n: s.type for n, s in specs.items()}
                hints = {n: dict(s.hints) for n, s in specs.items() if s.hints}
                if not self._tuning:
                    _strict.miss(self, "compile", options.target, _miss_spec(build, signature, constexprs, hints, where))
                art = self.compile(signature, constexprs, hints, options, "object" if options.target == "cpu" else "cubin")
                if local is not None:
                    local.put(build, options, art)
            self.obtained[source] += 1
            self.compile_count += 1
            self.cache[key] = art
        if remote and key not in self._recorded and (rec := _record.recorder()) is not None:
            self._recorded.add(key)  # a tuned launch's build may be in memory from its trial: recorded here
            build = self._build(specs, constexprs, options, config) if not options.debug else None
            if build is not None:
                rec.add(self, build, tuning=where, launch=self._launches.get(_where_id(where)) if where else None)
        return art

    def _local_builds(self) -> Any:
        """Without a server: the local cache of builds made here (client/_cache.py LocalBuilds), or None
        under TILEC_ALWAYS_COMPILE=1."""
        from ._cache import LocalBuilds, cache_root

        if not LocalBuilds.enabled():
            return None
        given = self.__dict__.get("_cache_given")
        local = self.__dict__.get("_local")
        if local is None or local.cache.root != cache_root(given):
            local = self._local = LocalBuilds(given)
        return local

    def _obtain(self, build: Any, tuned: tuple[dict, Any] | None) -> tuple[Artifact | None, str]:
        """A build from a pulled index, else (with a server) the disk cache or the server: (artifact, where
        from), or (None, "here")."""
        if build is None:
            return None, "here"
        index = _pulled.pulled()
        art = index.artifact(build) if index is not None else None
        if art is not None:
            return art, "disk"
        if self.builds is None:
            return None, "here"
        if _strict.strict_mode() != "off":  # the server serves what it holds; a compile it would make is a miss
            self.builds.compiling = False
        return self.builds.get(build, self.source, self.name, tuned, self.kind)

    def compile(self, signature: dict, constexprs: dict, hints: dict, options: CompileOptions, emit: str) -> Artifact:
        """Compile here, from the kernel already read (so errors name its file)."""
        _strict.count("compiles")
        request = CompileRequest(text=self.source, kind=self.kind, name=self.name, signature=signature,
                                 constexprs=constexprs, hints=hints, options=options, emit=emit)  # fmt: skip
        return compile_request(request, self.ks)

    def _build(self, specs: dict[str, ArgSpec], constexprs: dict[str, Any], options: CompileOptions,
               config: Any) -> Any:  # fmt: skip
        """The build as the service names it, or None when a constexpr has no wire form (None, an object)."""
        from ._fetch import Build, normal_config

        if not all(_wire_value(v) for v in constexprs.values()):
            return None
        tuned = set(config.kwargs) if config is not None else set()
        return Build(
            kernel_key=self.ks.key,
            signature={n: s.type for n, s in specs.items()},
            constexprs={k: v for k, v in constexprs.items() if k not in tuned},
            hints={n: dict(s.hints) for n, s in specs.items() if s.hints},
            config=normal_config({k: constexprs[k] for k in tuned}, options.num_warps, options.num_stages),
            target=options.target,
        )

    # ---- launch ------------------------------------------------------------------------------------

    def positional(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """A call that names a runtime argument, with the keyword arguments that continue its positional ones,
        in parameter order, moved among them (Liger-Kernel passes every argument by name; a call giving `eps=`
        after the positional ones is common): one form of the call for the warm path, which packs runtime
        arguments by position. A launch option (num_warps, ...) stays a keyword, as does anything after a gap;
        a call whose keywords are constexprs alone is left as it is (the warm path keys them as keywords)."""
        names, n = self._param_names, len(args)
        if self._runtime_params.isdisjoint(kwargs):
            return args, kwargs
        if n >= len(names) or names[n] not in kwargs or names[n] in _LAUNCH_OPTIONS:
            return args, kwargs
        rest, more = dict(kwargs), []
        for name in names[n:]:
            if name not in rest or name in _LAUNCH_OPTIONS:
                break
            more.append(rest.pop(name))
        return args + tuple(more), rest

    def run(self, grid: Any, args: tuple, kwargs: dict) -> None:
        if kwargs and not self._runtime_params.isdisjoint(kwargs):
            args, kwargs = self.positional(args, kwargs)
        fast = self.__dict__.get("_cuda_fast")
        if fast is not None and fast.launch(grid, args, kwargs):
            return  # warm cuda launch (runtime/fastpath.py)
        args = tuple(host_view(a) for a in args)  # torch CPU tensors: NumPy views, for the cpu target
        kwargs = {k: host_view(v) for k, v in kwargs.items()}
        bound, opts = self.bind(args, kwargs)
        target = select_target(list(bound.values()))
        if self.ks.autotune is not None and self.ks.autotune.configs:
            art, full = self._run_autotuned(grid, bound, opts, target)
        else:
            full = self.complete(bound)
            art = self._run_once(grid, full, opts, target)
        if target.startswith("cuda"):
            from tilec.runtime.fastpath import FastPath

            self.__dict__.setdefault("_cuda_fast", FastPath(self.params, value_names=self.value_names()))
            self._cuda_fast.remember(args, kwargs, self.runtime_names(full), art, full)

    def value_names(self) -> set[str]:
        """The parameters whose values, not only their classes, choose what a launch runs: the autotune
        key's (the tuned config is memoised per their values, as Triton's autotuner caches it) and every
        parameter a heuristic names (its value is computed from them)."""
        tuned = self.ks.autotune is not None and self.ks.autotune.configs
        names = set(self.ks.autotune.key) if tuned else set()
        params = {p.name for p in self.params}
        for text in self.ks.heuristics.values():
            names |= _named_in(text, params)
        return names

    def warm(self, args: tuple, kwargs: dict) -> Artifact:
        """Compile (or fetch) the build a launch with these arguments would use, without launching it
        (Triton's `kernel.warmup(...)`); an autotuned kernel warms its first config. A cuda build is kept per
        the warm launch path's key of the call: a library that warms before every launch (Triton's fused-softmax
        tutorial reads the registers to size its grid) pays the key, not the binding and the cache's lookup."""
        if kwargs and not self._runtime_params.isdisjoint(kwargs):
            args, kwargs = self.positional(args, kwargs)
        fast = self.__dict__.get("_cuda_fast")
        memo = self.__dict__.setdefault("_warm_memo", {})
        try:  # FastPath's key as key_of gives it once the call's classes are known (else None: a miss)
            got = memo.get(fast._key(args, kwargs)[0]) if fast is not None and memo else None
        except TypeError:  # an unhashable keyword value: not kept
            got = None
        if got is not None:
            return got
        art = self._warm(args, kwargs)
        if art.target.startswith("cuda"):
            from tilec.runtime.fastpath import FastPath

            fast = self.__dict__.setdefault("_cuda_fast", FastPath(self.params, value_names=self.value_names()))
            key = fast.key_of(args, kwargs)
            if len(memo) >= 4096:
                memo.clear()
            try:
                if key is not None:
                    memo[key] = art
            except TypeError:
                pass
        return art

    def _warm(self, args: tuple, kwargs: dict) -> Artifact:
        args = tuple(host_view(a) for a in args)
        bound, opts = self.bind(args, {k: host_view(v) for k, v in kwargs.items()})
        target = select_target(list(bound.values()))
        config = None
        if self.ks.autotune is not None and self.ks.autotune.configs:
            config = self.candidates(bound)[0]
            full, cfg_opts = self._config_args(bound, config)
            opts = {**cfg_opts, **opts}
        else:
            full = self.complete(bound)
        return self.artifact(full, CompileOptions(target=target, **opts), config=config)

    def _run_once(self, grid: Any, full: dict[str, Any], opts: dict, target: str, **how: Any) -> Artifact:
        """One launch; `how` goes to artifact() (config, remote, tuned, where)."""
        options = CompileOptions(target="cpu" if target == "cpu" else target, debug=self.debug, **opts)
        art = self.artifact(full, options, **how)
        g = check_grid(grid, full)
        runtime_args = [full[n] for n in self.runtime_names(full)]
        try:
            launch(options.target, art, runtime_args, g)
        except ArchMismatchError as refused:
            art = self._rebuild_for_driver(full, options, art, refused)
            launch(options.target, art, runtime_args, g)
        return art

    def _rebuild_for_driver(self, full: dict[str, Any], options: CompileOptions, art: Artifact,
                            refused: ArchMismatchError) -> Artifact:  # fmt: skip
        """The build for a GPU whose driver refused `art`'s cubin (built for another arch, or by a toolkit
        newer than the driver): the kernel compiled here to PTX for the device's arch, which the driver's
        own compiler turns into code for its GPU at load. Kept in memory for this specialisation; if the
        driver refuses that PTX too, its ArchMismatchError is the caller's."""
        warnings.warn(f"{refused}; rebuilding {self.name} from PTX for the driver to compile", UserWarning,
                      stacklevel=4)  # fmt: skip
        specs, constexprs = self.specialisation(full)
        target = refused.device_target
        ptx = self.compile({n: s.type for n, s in specs.items()}, constexprs,
                           {n: dict(s.hints) for n, s in specs.items() if s.hints}, replace(options, target=target), "ptx")
        rebuilt = Artifact(target=target, kernel_name=ptx.kernel_name, binary=ptx.ptx.encode() + b"\0", ptx=ptx.ptx,
                           metadata=dict(ptx.metadata), compiler_version=ptx.compiler_version)  # fmt: skip
        for key, held in list(self.cache.items()):
            if held is art:
                self.cache[key] = rebuilt
        return rebuilt

    def _config_args(self, bound: dict[str, Any], cfg) -> tuple[dict[str, Any], dict]:
        merged = dict(bound)
        for k, v in cfg.kwargs.items():
            if k in bound:
                raise ArgumentError(f"argument '{k}' is set by the autotune configs; do not pass it")
            merged[k] = v
        opts = {k: getattr(cfg, k) for k in _LAUNCH_OPTIONS if getattr(cfg, k, None) is not None}
        return self.complete(merged), opts

    def tuning_key(self, bound: dict[str, Any]) -> tuple:
        parts = []
        for k in self.ks.autotune.key:
            v = bound.get(k)
            is_array = hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, np.generic)
            parts.append((k, (tuple(v.shape), str(v.dtype)) if is_array else repr(v)))
        dtypes = tuple((k, specialise(k, v).type) for k, v in sorted(bound.items()) if _is_runtime(v))
        return tuple(parts), dtypes

    def shared_key(self, bound: dict[str, Any], target: str) -> dict[str, str]:
        """The tuning key's parts as the service's worker writes them for the same launch: kernel key,
        the autotune key's values (a tensor as its shape and dtype), the runtime dtypes, the target."""
        runtime = [p.name for p in self.params if not p.constexpr and _given(p, bound) is not None]
        types = {n: specialise(n, _given(p, bound)).type for p in self.params if (n := p.name) in runtime}
        tk = tuning_key(kernel_key=self.ks.key, key_names=self.ks.autotune.key, runtime=runtime, signature=types,
                        value=lambda n: _key_value(bound[n], types[n]), target=target)  # fmt: skip
        return {"kernel_key": tk.kernel_key, "key": tk.key, "dtypes": tk.dtypes, "target": tk.target}

    def _where_of(self, bound: dict[str, Any], target: str) -> dict[str, str] | None:
        """shared_key, or None (without a server) when a key value has no form the service reads."""
        if self.shared is not None:
            return self.shared_key(bound, target)
        try:
            return self.shared_key(bound, target)
        except (TypeError, ValueError, AttributeError, KeyError):
            return None

    def _run_autotuned(
        self, grid: Any, bound: dict[str, Any], opts: dict, target: str
    ) -> tuple[Artifact, dict[str, Any]]:
        """Launch with the config chosen for this tuning key; the artifact launched and every argument."""
        key = self.tuning_key(bound)
        cfg = self.best_configs.get(key)
        if cfg is None:
            self._where[key] = self._where_of(bound, target)
            cfg = self._host_config(self._choose(grid, bound, opts, target, key))
            self.best_configs[key] = cfg
        full, cfg_opts = self._config_args(bound, cfg)
        _config_pre_hook(cfg, full)
        art = self._run_once(grid, full, {**cfg_opts, **opts}, target, config=cfg, tuned=self._tuned.get(key),
                             where=self._where.get(key))  # fmt: skip
        return art, full

    def candidates(self, bound: dict[str, Any]) -> list[Any]:
        """The configs to time for these arguments: the decorator's, pruned here by prune_configs_by."""
        if self.host_autotune is None:
            return list(self.ks.autotune.configs)
        return self.host_autotune.prune(list(self.host_autotune.configs), self.complete_loose(bound))

    def complete_loose(self, bound: dict[str, Any]) -> dict[str, Any]:
        """The arguments with defaults filled in, for host hooks (constexprs a config sets may be absent)."""
        full = dict(bound)
        for p in self.params:
            if p.name not in full and p.has_default:
                full[p.name] = p.default
        return full

    def _host_config(self, cfg: Any) -> Any:
        """A config found elsewhere (the server, the local cache) as the decorator's own object, with its
        pre_hook, when one has the same meta-parameters, warps and stages."""
        if self.host_autotune is None:
            return cfg
        for c in self.host_autotune.configs:
            if (c.kwargs, c.num_warps, c.num_stages) == (dict(cfg.kwargs), cfg.num_warps or 4, cfg.num_stages or 3):
                return c
        return cfg

    def _choose(self, grid: Any, bound: dict[str, Any], opts: dict, target: str, key: tuple) -> Any:
        """The config for a new tuning key: a pulled index's, else the server's shared result, else a local
        tune (a miss; published)."""
        where = self._where[key]
        if where is None:  # an autotune key value the service has no form for: nothing shared, pulled or recorded
            return self._tune(grid, bound, opts, target, key)[0]
        if _record.recorder() is not None or _strict.strict_mode() != "off" or self.shared is not None:
            self._launches.setdefault(_where_id(where), _record.launch_description(self, grid, bound, self.candidates(bound)))
        index = _pulled.pulled()
        pulled = _config(index.tuned_config(where)) if index is not None else None
        if pulled is not None:
            return pulled
        if self.shared is None:
            return self._tune(grid, bound, opts, target, key)[0]
        self._tuned[key] = (where, None)
        kept = self.builds.tuned_config(where) if self.builds is not None else None
        if kept is not None:  # a fresh process's first launch: a file read, no lookup
            self.best_configs[key] = kept
            return kept
        found, result = self.shared.lookup_result(where)
        if found is not None:
            self._tuned[key] = (where, result)
            self.best_configs[key] = found
            return found
        best, timings = self._tune(grid, bound, opts, target, key)
        if not timings:  # one config: nothing was timed, nothing to share
            return best
        agreed = self.shared.publish(self.source, self.name, where, timings, self.kind)
        if agreed is not None:  # another rank may have published a faster config first: launch the shared one
            self.best_configs[key] = best = agreed
        return best

    def _tune(
        self, grid: Any, bound: dict[str, Any], opts: dict, target: str, key: tuple
    ) -> tuple[Any, list]:
        """Time every config on the actual arguments. Every array argument (NumPy, torch, CuPy) is restored
        after each trial run, so tuning leaves them as the one real run after it finds them; the decorator's
        reset_to_zero arguments are zeroed before each run, the real one included."""
        configs = self.candidates(bound)
        if len(configs) == 1:  # nothing to choose between, as in Triton: no timing
            self.best_configs[key] = configs[0]
            return configs[0], []
        where = self._where.get(key)
        given = {p.name: bound[p.name] for p in self.params if p.constexpr and p.name in bound and _wire_value(bound[p.name])}
        _strict.miss(self, "tune", target, {"signature": where_signature(self, bound), "constexprs": given, "tuning": where},
                     launch=self._launches.get(_where_id(where)) if where else None)  # fmt: skip
        _strict.count("tunes")
        self._tuning = True
        try:
            return self._timed(grid, bound, opts, target, key, configs)
        finally:
            self._tuning = False

    def _timed(self, grid: Any, bound: dict[str, Any], opts: dict, target: str, key: tuple,
               configs: list[Any]) -> tuple[Any, list]:  # fmt: skip
        spec = self.ks.autotune
        host = self.host_autotune
        saved = {k: (v, snap) for k, v in bound.items() if (snap := snapshot(v)) is not None}
        unknown = sorted(set(spec.reset_to_zero) - set(saved))
        if unknown:
            raise ArgumentError(
                f"autotune reset_to_zero names {unknown}, which are not array arguments given"
            )
        zero = [bound[k] for k in spec.reset_to_zero]
        timings = []
        refused: Exception | None = None
        for cfg in configs:
            full, cfg_opts = self._config_args(bound, cfg)

            def trial(full=full, cfg_opts=cfg_opts, cfg=cfg) -> None:
                if host is not None and host.pre_hook is not None:
                    host.pre_hook(full)
                _config_pre_hook(cfg, full)
                self._run_once(grid, full, {**cfg_opts, **opts}, target, remote=False)  # trials build here
                if host is not None and host.post_hook is not None:
                    host.post_hook(full, None)

            try:
                timings.append((cfg, time_config(trial, target, zero, saved.values())))
            except (OutOfResourcesError, StaticAssertionError) as exc:  # this config cannot build: left out,
                refused = refused or exc  # as Triton's autotuner times it as infinitely slow
        zero_arrays(zero)
        if not timings:
            raise refused
        best = min(timings, key=lambda t: t[1])[0]
        self.best_configs[key] = best
        self.trials[key] = [(dict(c.kwargs), t) for c, t in timings]
        return best, timings


def _where_id(where: dict[str, str]) -> str:
    return "\0".join(where[k] for k in ("kernel_key", "key", "dtypes", "target"))


def where_signature(kernel: JITKernel, bound: dict[str, Any]) -> dict[str, str]:
    """The runtime parameters' types of a launch (a tune miss names them with its tuning key)."""
    return {p.name: specialise(p.name, v).type for p in kernel.params
            if not p.constexpr and (v := _given(p, bound)) is not None}  # fmt: skip


def _miss_spec(build: Any, signature: dict, constexprs: dict, hints: dict, where: dict | None) -> dict[str, Any]:
    """A compile miss's specialisation as the server keeps it (a constexpr with no wire form by its repr)."""
    if build is not None:
        spec = {"signature": build.signature, "constexprs": build.constexprs, "hints": build.hints,
                "config": build.config}  # fmt: skip
    else:
        spec = {"signature": signature, "constexprs": {k: v if _wire_value(v) else repr(v) for k, v in constexprs.items()},
                "hints": hints, "config": None}  # fmt: skip
    return {**spec, "tuning": where}


def _named_in(heuristic: str, params: set[str]) -> set[str]:
    """The parameters a heuristic's source names (as `args['N']`); all of them when it does not parse."""
    import ast

    try:
        tree = ast.parse(heuristic.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(params)
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in params}


def _config_pre_hook(cfg: Any, full: dict[str, Any]) -> None:
    hook = getattr(cfg, "pre_hook", None)
    if hook is not None:
        hook(full)


def _wire_value(value: Any) -> bool:
    """A constexpr the service's API can carry: a bool, an int of 64 bits, a finite float, a string."""
    if isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return -(2**63) <= value < 2**64
    return isinstance(value, float) and value == value and abs(value) != float("inf")


def _given(param: Any, bound: dict[str, Any]) -> Any:
    if param.name in bound:
        return bound[param.name]
    return param.default if param.has_default else None


def _is_runtime(v: Any) -> bool:
    return isinstance(v, np.ndarray | BF16Array | np.generic | int | float)


def jit(
    source_or_path: str | os.PathLike, name: str | None = None, *, server: Any = None, trusted_keys: Any = None,
    cache: Any = None,
) -> JITKernel:  # fmt: skip
    """Read a Triton-language kernel (source text or a path to a .py file) for launching. `server` (a
    Client, or a URL used with TILEC_TOKEN) builds and shares autotune results; None: TILEC_URL if set;
    False: none. `trusted_keys` (TrustedKeys, or keys as text) overrides TILEC_TRUSTED_KEYS; `cache` (a
    LocalCache or a directory) the local cache (TILEC_CACHE_DIR, else the user cache dir)."""
    if server is None:
        server = os.environ.get("TILEC_URL") or None
    return JITKernel(source_or_path, name, server=server or None, trusted_keys=trusted_keys, cache=cache)


def constexpr_value(v: Any) -> Any:
    """A constexpr as the compiler takes it: Triton's dtype objects (`INDEX_TY=tl.int32`, a library's
    `tl.float32` picked on the host) by their spelling ('int32', 'fp16'), which names the same dtype."""
    if type(v).__name__ == "dtype" and type(v).__module__.startswith("triton.language"):
        return str(v.name)
    if isinstance(v, tuple) and any(type(x).__name__ == "dtype" for x in v):
        return tuple(constexpr_value(x) for x in v)
    return v
