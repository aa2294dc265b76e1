"""deploy/: the Dockerfile, compose.yaml and Kubernetes manifests hold what operators rely on.

Parsed, not built (no container engine in CI): probes on /readyz and /healthz, non-root,
resources, HPA, PDB, ConfigMap with a valid gateway TOML, Secret with the keys the config
names, Redis reachable under the name the config uses, indexes read-only for the gateway.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.support.paths import ROOT

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"


def _manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for f in sorted(K8S.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(f.read_text(encoding="utf-8")) if d)
    return docs


@pytest.fixture(name="k8s", scope="module")
def _k8s() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in _manifests() if d.get("kind") != "Kustomization"}


def _one(k8s: dict[tuple[str, str], dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for (k, _), d in k8s.items() if k == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _gateway_toml(k8s: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return tomllib.loads(_one(k8s, "ConfigMap")["data"]["gateway.toml"])


def test_every_manifest_has_kind_name_and_api_version() -> None:
    for d in _manifests():
        assert d.get("apiVersion") and d.get("kind"), d
        if d["kind"] != "Kustomization":
            assert d["metadata"]["name"]


def test_kustomization_lists_every_manifest_file() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files


def test_deployment_probes_readyz_and_healthz_on_the_container_port(k8s: dict) -> None:
    c = _one(k8s, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["port"] in ports
    bind = _gateway_toml(k8s)["server"]["bind"]
    assert bind == f"0.0.0.0:{ports['http']}"


def test_deployment_runs_non_root_read_only_without_privileges(k8s: dict) -> None:
    pod = _one(k8s, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    c = pod["containers"][0]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_every_container_has_cpu_and_memory_requests_and_limits(k8s: dict) -> None:
    for (kind, name), d in k8s.items():
        if kind not in ("Deployment", "StatefulSet", "Job"):
            continue
        for c in d["spec"]["template"]["spec"]["containers"]:
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"][part]), f"{kind}/{name}/{c['name']} {part}"


def test_graceful_shutdown_fits_in_the_termination_grace_period(k8s: dict) -> None:
    pod = _one(k8s, "Deployment")["spec"]["template"]["spec"]
    pre_stop = pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
    sleep = float(pre_stop[-1]) if pre_stop[0] == "sleep" else 0.0
    graceful = float(_gateway_toml(k8s)["server"]["graceful_timeout"])
    assert sleep + graceful < pod["terminationGracePeriodSeconds"]


def test_config_keys_come_from_the_mounted_secret(k8s: dict) -> None:
    pod = _one(k8s, "Deployment")["spec"]["template"]["spec"]
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret_volume = next(n for n, v in volumes.items() if "secret" in v)
    secret = k8s[("Secret", volumes[secret_volume]["secret"]["secretName"])]
    key_dir = mounts[secret_volume]["mountPath"].rstrip("/")
    for tenant in _gateway_toml(k8s)["tenants"].values():
        for key in tenant["secrets"]:
            assert "value_env" not in key, "keys are files from the Secret, not environment variables"
            path = Path(key["value_file"])
            assert str(path.parent) == key_dir
            assert path.name in secret.get("stringData", secret.get("data", {}))


def test_config_map_is_mounted_where_the_args_read_it(k8s: dict) -> None:
    pod = _one(k8s, "Deployment")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    cfg_path = c["args"][c["args"].index("--config") + 1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == cfg_path)
    assert volumes[mount["name"]]["configMap"]["name"] == _one(k8s, "ConfigMap")["metadata"]["name"]


def test_indexes_are_read_only_for_the_gateway_and_written_by_the_job(k8s: dict) -> None:
    toml = _gateway_toml(k8s)
    pod = _one(k8s, "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == toml["indexes"]["dir"])
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["persistentVolumeClaim"]["readOnly"] is True
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert "ReadWriteMany" in k8s[("PersistentVolumeClaim", claim)]["spec"]["accessModes"]
    job = _one(k8s, "Job")["spec"]["template"]["spec"]
    assert job["securityContext"]["runAsNonRoot"] is True
    jmount = next(m for m in job["containers"][0]["volumeMounts"] if m["mountPath"] == toml["indexes"]["dir"])
    assert not jmount.get("readOnly", False)
    assert job["containers"][0]["args"][:2] == ["index", "add"]


def test_several_workers_use_redis_served_in_the_cluster(k8s: dict) -> None:
    toml = _gateway_toml(k8s)
    assert toml["server"]["workers"] > 1
    host = urlparse(toml["replay"]["redis_url"]).hostname
    service = k8s[("Service", host)]
    redis = _one(k8s, "StatefulSet")
    assert redis["spec"]["serviceName"] == host
    assert service["spec"]["selector"].items() <= redis["spec"]["template"]["metadata"]["labels"].items()
    assert redis["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_service_hpa_and_pdb_select_the_deployment(k8s: dict) -> None:
    dep = _one(k8s, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = k8s[("Service", "kbgate")]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    hpa = _one(k8s, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": dep["metadata"]["name"]}
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    pdb = _one(k8s, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]


def test_compose_runs_redis_an_indexer_job_and_the_gateway() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
    svc = compose["services"]
    assert {"redis", "indexer", "gateway"} <= set(svc)
    gw = svc["gateway"]
    assert gw["depends_on"]["redis"]["condition"] == "service_healthy"
    assert gw["depends_on"]["indexer"]["condition"] == "service_completed_successfully"
    assert not gw["user"].startswith("0")
    assert "/readyz" in " ".join(gw["healthcheck"]["test"])
    toml = tomllib.loads(compose["configs"]["gateway_toml"]["content"])
    assert urlparse(toml["replay"]["redis_url"]).hostname == "redis"
    assert toml["server"]["workers"] > 1
    assert any(v.endswith(f":{toml['indexes']['dir']}:ro") for v in gw["volumes"])
    assert any(v.endswith(f":{toml['indexes']['dir']}") for v in svc["indexer"]["volumes"])
    assert svc["indexer"]["restart"] == "no"


def test_dockerfile_builds_wheels_in_a_builder_and_runs_non_root() -> None:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\w+))?", text, re.MULTILINE | re.IGNORECASE)
    assert len(stages) >= 2 and stages[0][1] == "builder"
    assert "slim" in text.split("ARG PYTHON_IMAGE=")[1].split()[0]
    assert re.search(r"^(RUN | && )pip wheel ", text, re.MULTILINE)
    assert re.search(r"^COPY --from=builder ", text, re.MULTILINE)
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert re.search(r"^HEALTHCHECK .*", text, re.MULTILINE)


def test_the_image_is_built_from_the_versions_of_the_lock(tmp_path: Path) -> None:
    # the builder's own commands, run on a copy of the lock: every runtime dependency pinned, no hash line
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^COPY [^\n]*\brequirements\.lock\b", text, re.MULTILINE)
    run = re.search(r"^RUN (sed [^\n]*requirements\.lock > (\S+)) \\\n && pip wheel --wheel-dir /wheels -c (\S+) \.$",
                    text, re.MULTILINE)
    assert run and run[2] == run[3], "the pip wheel of the builder is not constrained by the lock"
    shutil.copy(ROOT / "requirements.lock", tmp_path)
    subprocess.run(["sh", "-c", run[1].replace(run[2], "pins.txt")], cwd=tmp_path, check=True)
    pins = [line for line in (tmp_path / "pins.txt").read_text("utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    assert pins and all(re.fullmatch(r"[A-Za-z0-9._-]+==[^ ;\\]+( ; [^\\]+)?", line) for line in pins), pins[:5]
    pinned = {line.split("==")[0].lower() for line in pins}
    wanted = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower()
              for d in tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]}
    assert wanted <= pinned, wanted - pinned
