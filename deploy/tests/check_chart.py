"""Renders the Helm chart with real Helm (helm-python-sdk) for the default values and every
values file in deploy/helm/trawl/ci/, lints it, validates every built-in Kubernetes object
against the Kubernetes schemas (kubernetes-validate, strict: unknown fields fail), and
checks what the chart promises: probes, security context, grace periods, KEDA triggers
with what the nats-jetstream scaler needs, HPAs when KEDA is off, GPU indexers and
refiners, the refiner's engine settings, Secret references, the chart's own NATS
JetStream cluster (a StatefulSet whose every server routes to every other, JetStream on a
volume of its own, the services and KEDA pointed at it, the streams' copies at most its
servers) or none with an external NATS, and the queue settings the services read. Exits
non-zero with every failure listed."""

import copy
import pathlib
import re
import sys

import helm_python
import kubernetes_validate
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "trawl"
K8S_VERSION = "1.30.0"
STAGES = ["ingester", "frontier", "fetcher", "extractor", "renderer", "indexer", "notifier", "refiner"]
STREAMS = {"ingester": "TRAWL_ARCHIVES", "fetcher": "TRAWL_FETCH", "extractor": "TRAWL_FETCHED", "renderer": "TRAWL_RENDER", "indexer": "TRAWL_DOCS",
           "refiner": "TRAWL_REFINE"}
# Every setting the refiner's engine takes from the chart (crates/core's RefineSettings).
REFINE_ENV = {"TRAWL_REFINE_ENGINE", "TRAWL_REFINE_MODEL", "TRAWL_REFINE_ENDPOINT", "TRAWL_REFINE_SERVED_MODEL",
              "TRAWL_REFINE_API_KEY", "TRAWL_REFINE_SYSTEM_PROMPT", "TRAWL_REFINE_MAX_NEW_TOKENS",
              "TRAWL_REFINE_TEMPERATURE", "TRAWL_REFINE_CONTEXT_LENGTH", "TRAWL_REFINE_CONCURRENCY"}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def merge(base, over):
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def render(values):
    chart = helm_python.Chart.load(str(CHART))
    files = chart.render(values, name="trawl", namespace="crawl")
    docs = []
    for path, text in files.items():
        if path.endswith("NOTES.txt"):
            continue
        for d in yaml.safe_load_all(text):
            if d:
                docs.append(d)
    return docs


def by_kind(docs, kind):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def check_refiner(tag, eff, spec, c, env):
    """The refiner's engine, model, server, key and prompt, as `refine` in the values says."""
    r = eff["refine"]
    val = {k: e.get("value") for k, e in env.items()}
    check(val.get("TRAWL_REFINE_ENGINE") == r["engine"], f"{tag} refiner engine {val.get('TRAWL_REFINE_ENGINE')}")
    check(c["command"] == ["/usr/local/bin/trawl-refiner"], f"{tag} refiner runs {c['command']}")
    for key, var in [("maxNewTokens", "TRAWL_REFINE_MAX_NEW_TOKENS"), ("contextLength", "TRAWL_REFINE_CONTEXT_LENGTH"),
                     ("concurrency", "TRAWL_REFINE_CONCURRENCY")]:
        check(val.get(var) == str(r[key]), f"{tag} refiner {var}={val.get(var)}, values {r[key]}")
    check(float(val.get("TRAWL_REFINE_TEMPERATURE", "nan")) == float(r["temperature"]), f"{tag} refiner temperature")
    check(val.get("TRAWL_REFINE_MODEL") == (r["model"]["path"] or None), f"{tag} refiner model {val.get('TRAWL_REFINE_MODEL')}")
    check(val.get("TRAWL_REFINE_ENDPOINT") == (r["endpoint"] or None), f"{tag} refiner endpoint")
    check(val.get("TRAWL_REFINE_SERVED_MODEL") == (r["servedModel"] or None), f"{tag} refiner served model")
    key = env.get("TRAWL_REFINE_API_KEY")
    if r["apiKey"]["existingSecret"]:
        ref = (key or {}).get("valueFrom", {}).get("secretKeyRef", {})
        check(ref.get("name") == r["apiKey"]["existingSecret"] and ref.get("key") == r["apiKey"]["secretKey"],
              f"{tag} refiner API key not from {r['apiKey']['existingSecret']}")
    else:
        check(key is None, f"{tag} refiner API key set without a Secret")
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    claim = r["model"]["existingClaim"]
    if claim:
        check(vols.get("refine-model", {}).get("persistentVolumeClaim", {}).get("claimName") == claim,
              f"{tag} refiner model volume not {claim}")
        m = mounts.get("refine-model", {})
        check(m.get("mountPath") == r["model"]["mountPath"] and m.get("readOnly") is True,
              f"{tag} refiner model not mounted read-only at {r['model']['mountPath']}")
    else:
        check("refine-model" not in vols, f"{tag} refiner model volume without a claim")
    sp = r["systemPrompt"]
    prompt = val.get("TRAWL_REFINE_SYSTEM_PROMPT")
    if sp["path"]:
        check(prompt == sp["path"], f"{tag} refiner system prompt {prompt}, not {sp['path']}")
    elif sp["existingConfigMap"] or sp["text"]:
        cm = vols.get("refine-prompt", {}).get("configMap", {})
        want = sp["existingConfigMap"] or "trawl-refine"
        check(cm.get("name") == want, f"{tag} refiner prompt ConfigMap {cm.get('name')}, not {want}")
        check(cm.get("items") == [{"key": sp["key"], "path": sp["key"]}], f"{tag} refiner prompt key")
        dir_ = mounts.get("refine-prompt", {}).get("mountPath")
        check(dir_ and prompt == f"{dir_}/{sp['key']}", f"{tag} refiner prompt {prompt} is not the mounted file")
    else:
        check(prompt is None and "refine-prompt" not in vols, f"{tag} refiner prompt without one in the values")
    if r["engine"] != "extract":
        check(prompt, f"{tag} refiner engine {r['engine']} without its system prompt")


def stream_replicas(eff):
    """TRAWL_STREAM_REPLICAS as the values mean it: queue.streamReplicas, else 3 on the
    chart's own cluster (at most its servers), 1 on an external NATS."""
    asked = eff["queue"].get("streamReplicas")
    if asked is not None:
        return asked
    n = eff["nats"]["deploy"]
    return min(3, n["replicas"]) if n["enabled"] else 1


def check_nats(tag, eff, docs):
    """The chart's own NATS cluster when nats.deploy.enabled, nothing of it otherwise; the
    services' NATS URL and queue settings either way."""
    n = eff["nats"]["deploy"]
    sts = by_kind(docs, "StatefulSet")
    services = by_kind(docs, "Service")
    cms = by_kind(docs, "ConfigMap")
    pdbs = by_kind(docs, "PodDisruptionBudget")
    cm = cms.get("trawl", {}).get("data", {})
    q = eff["queue"]
    want_url = "nats://trawl-nats:4222" if n["enabled"] else eff["nats"]["url"]
    check(cm.get("TRAWL_NATS_URL") == want_url, f"{tag} TRAWL_NATS_URL {cm.get('TRAWL_NATS_URL')!r}, want {want_url!r}")
    check(cm.get("TRAWL_STREAM_REPLICAS") == str(stream_replicas(eff)),
          f"{tag} TRAWL_STREAM_REPLICAS {cm.get('TRAWL_STREAM_REPLICAS')!r}, want {stream_replicas(eff)}")
    for key, var in [("ackWaitSeconds", "TRAWL_ACK_WAIT_S"), ("claimTtlSeconds", "TRAWL_CLAIM_TTL_S"),
                     ("claimLeaseSeconds", "TRAWL_CLAIM_LEASE_S"), ("stallAfterSeconds", "TRAWL_STALL_AFTER_S")]:
        check(cm.get(var) == str(q[key]), f"{tag} {var} {cm.get(var)!r}, values {q[key]}")
    if not n["enabled"]:
        check(not sts, f"{tag} a StatefulSet ({', '.join(sts)}) with nats.deploy off")
        check(not {"trawl-nats", "trawl-nats-headless"} & services.keys(), f"{tag} NATS Services with nats.deploy off")
        check("trawl-nats-config" not in cms and "trawl-nats" not in pdbs, f"{tag} NATS config or PDB with nats.deploy off")
        return
    replicas = n["replicas"]
    ss = sts.get("trawl-nats")
    if not check(ss is not None, f"{tag} no NATS StatefulSet"):
        return
    spec = ss["spec"]
    check(spec["replicas"] == replicas, f"{tag} NATS replicas {spec['replicas']}, values {replicas}")
    check(spec.get("podManagementPolicy") == "Parallel", f"{tag} NATS servers not started in parallel")
    check(spec["serviceName"] == "trawl-nats-headless", f"{tag} NATS serviceName {spec['serviceName']}")
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    check(c["image"] == n["image"], f"{tag} NATS image {c['image']}")
    check(c["command"] == ["nats-server", "-c", "/etc/nats/nats.conf"], f"{tag} NATS runs {c['command']}")
    env = {e["name"]: e for e in c.get("env", [])}
    check(env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name",
          f"{tag} NATS without POD_NAME from the downward API")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(ports == {"client": 4222, "cluster": 6222, "monitor": 8222}, f"{tag} NATS ports {ports}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path", "").startswith("/healthz") and get.get("port") == "monitor", f"{tag} NATS {probe} {get}")
    check(c["startupProbe"]["httpGet"]["path"] == "/healthz", f"{tag} NATS started before JetStream caught up")
    check(pod["securityContext"].get("runAsNonRoot") is True, f"{tag} NATS may run as root")
    check(c["securityContext"].get("allowPrivilegeEscalation") is False, f"{tag} NATS privilege escalation")
    check(c["securityContext"].get("readOnlyRootFilesystem") is True, f"{tag} NATS writable root")
    check(c["resources"] == n["resources"], f"{tag} NATS resources {c['resources']}")
    check(pod["terminationGracePeriodSeconds"] > n["lameDuckSeconds"] + n["lameDuckGraceSeconds"],
          f"{tag} NATS grace {pod['terminationGracePeriodSeconds']}s cuts lame duck mode short")
    pre = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    check(any(a.startswith("ldm=") for a in pre), f"{tag} NATS stops without lame duck mode: {pre}")
    check("checksum/config" in spec["template"]["metadata"].get("annotations", {}), f"{tag} NATS pods not rolled on a new nats.conf")
    # JetStream's file store on each server's own claim.
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    (vct,) = spec.get("volumeClaimTemplates") or [{}]
    check(vct.get("metadata", {}).get("name") == "data" and mounts.get("data") == "/data",
          f"{tag} NATS data volume not a claim template mounted at /data")
    vspec = vct.get("spec", {})
    check(vspec.get("resources", {}).get("requests", {}).get("storage") == n["storage"]["size"],
          f"{tag} NATS volume size {vspec.get('resources')}")
    check(vspec.get("storageClassName") == (n["storage"].get("storageClassName") or None),
          f"{tag} NATS StorageClass {vspec.get('storageClassName')}")
    check(vspec.get("accessModes") == ["ReadWriteOnce"], f"{tag} NATS volume access {vspec.get('accessModes')}")
    # nats.conf: named after the pod, JetStream on the volume, every server in the routes.
    conf = cms.get("trawl-nats-config", {}).get("data", {}).get("nats.conf", "")
    vols = {v["name"]: v for v in pod["volumes"]}
    check(vols.get("config", {}).get("configMap", {}).get("name") == "trawl-nats-config"
          and mounts.get("config") == "/etc/nats", f"{tag} nats.conf not mounted at /etc/nats")
    check(re.search(r"^server_name: \$POD_NAME$", conf, re.M), f"{tag} NATS server_name not the pod's name")
    check(re.search(r'jetstream \{[^}]*store_dir: "/data"', conf), f"{tag} JetStream not on the /data volume")
    check(re.search(r"^lame_duck_duration: ", conf, re.M), f"{tag} nats.conf without lame_duck_duration")
    check(re.search(rf"^max_payload: {re.escape(str(n['maxPayload']))}$", conf, re.M), f"{tag} nats.conf max_payload")
    cluster = re.search(r"^cluster \{(.*?)^\}", conf, re.M | re.S)
    if replicas > 1:
        block = cluster.group(1) if check(cluster, f"{tag} nats.conf without a cluster block") else ""
        routes = re.findall(r'"(nats://[^"]+)"', block)
        want = [f"nats://trawl-nats-{i}.trawl-nats-headless:6222" for i in range(replicas)]
        check(routes == want, f"{tag} NATS routes {routes}, want {want}")
        check(re.search(r'name: "?trawl"?\s', block) and re.search(r"port: 6222\s", block), f"{tag} NATS cluster name or port")
    else:
        check(cluster is None, f"{tag} a cluster block on a single NATS server")
    auth = eff["nats"]["auth"]
    authz = re.search(r"^authorization \{(.*?)^\}", conf, re.M | re.S)
    if auth["existingSecret"]:
        block = authz.group(1) if check(authz, f"{tag} NATS without authorization while nats.auth is set") else ""
        pairs = ([("token", "NATS_TOKEN", auth["tokenKey"])] if auth.get("tokenKey")
                 else [("user", "NATS_USER", auth["userKey"]), ("password", "NATS_PASSWORD", auth["passwordKey"])])
        for field, var, key in pairs:
            check(re.search(rf"{field}: \${var}\b", block), f"{tag} NATS authorization {field} not ${var}")
            ref = env.get(var, {}).get("valueFrom", {}).get("secretKeyRef", {})
            check(ref.get("name") == auth["existingSecret"] and ref.get("key") == key,
                  f"{tag} NATS {var} not from {auth['existingSecret']}/{key}")
    else:
        check(authz is None, f"{tag} NATS authorization without nats.auth.existingSecret")
    # The headless Service names each server (published before it is ready: the cluster
    # forms through it); the client Service is what the services and KEDA use.
    sel = spec["selector"]["matchLabels"]
    check(spec["template"]["metadata"]["labels"].items() >= sel.items(), f"{tag} NATS pods not matched by their selector")
    hl = services.get("trawl-nats-headless", {}).get("spec", {})
    check(hl.get("clusterIP") == "None" and hl.get("publishNotReadyAddresses") is True and hl.get("selector") == sel,
          f"{tag} NATS headless Service {hl}")
    check({p["port"] for p in hl.get("ports", [])} == {4222, 6222, 8222}, f"{tag} NATS headless Service ports")
    cl = services.get("trawl-nats", {}).get("spec", {})
    check(cl.get("selector") == sel and {p["port"] for p in cl.get("ports", [])} == {4222, 8222},
          f"{tag} NATS client Service {cl}")
    pdb = pdbs.get("trawl-nats", {}).get("spec", {})
    check(pdb.get("maxUnavailable") == 1 and pdb.get("selector", {}).get("matchLabels") == sel, f"{tag} NATS PDB {pdb}")
    check(stream_replicas(eff) <= replicas, f"{tag} {stream_replicas(eff)} stream copies on {replicas} servers")


def check_case(name, values, over):
    docs = render(values)
    tag = f"[{name}]"
    builtin = [d for d in docs if d["apiVersion"].split("/")[0] in ("v1", "apps", "policy", "autoscaling")]
    for d in builtin:
        try:
            kubernetes_validate.validate(d, K8S_VERSION, strict=True)
        except Exception as e:  # noqa: BLE001 - report every kind of failure
            failures.append(f"{tag} {d['kind']}/{d['metadata']['name']}: {e}")
    deployments = by_kind(docs, "Deployment")
    eff = merge(yaml.safe_load((CHART / "values.yaml").read_text()), over)
    keda = eff["keda"]["enabled"]
    for stage in STAGES:
        dep = deployments.get(f"trawl-{stage}")
        if not check(dep is not None, f"{tag} no Deployment for {stage}"):
            continue
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        want = [f"/usr/local/bin/trawl-{stage}"]
        if stage == "renderer":
            want = ["/usr/bin/tini", "--"] + want
        check(c["command"] == want, f"{tag} {stage} runs {c['command']}")
        check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", f"{tag} {stage} liveness")
        check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{tag} {stage} readiness")
        check(spec["securityContext"].get("runAsNonRoot") is True, f"{tag} {stage} may run as root")
        check(c["securityContext"].get("allowPrivilegeEscalation") is False, f"{tag} {stage} privilege escalation")
        check(c["securityContext"].get("readOnlyRootFilesystem") is True, f"{tag} {stage} writable root")
        drain = eff["queue"]["ackWaitSeconds"] if stage != "frontier" else 30
        check(spec["terminationGracePeriodSeconds"] >= min(drain, 60),
              f"{tag} {stage} grace {spec['terminationGracePeriodSeconds']}s is shorter than the drain")
        env = {e["name"]: e for e in c.get("env", [])}
        check("TRAWL_CONCURRENCY" in env, f"{tag} {stage} has no TRAWL_CONCURRENCY")
        auto = eff["stages"][stage]["autoscaling"]["enabled"] and stage != "frontier"
        check(("replicas" in dep["spec"]) != auto, f"{tag} {stage}: replicas set beside an autoscaler or missing without one")
        secret = eff["nats"]["auth"]["existingSecret"]
        if secret:
            var = "TRAWL_NATS_TOKEN" if eff["nats"]["auth"].get("tokenKey") else "TRAWL_NATS_PASSWORD"
            ref = env.get(var, {}).get("valueFrom", {}).get("secretKeyRef", {})
            check(ref.get("name") == secret, f"{tag} {stage} {var} not from {secret}")
        rsecret = eff["redis"]["auth"]["existingSecret"]
        if rsecret:
            ref = env.get("TRAWL_REDIS_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
            check(ref.get("name") == rsecret and ref.get("key") == eff["redis"]["auth"]["urlKey"],
                  f"{tag} {stage} Redis URL not from {rsecret}")
        if stage == "notifier" and eff["webhook"]["existingSecret"]:
            ref = env.get("TRAWL_WEBHOOK_SECRET", {}).get("valueFrom", {}).get("secretKeyRef", {})
            check(ref.get("name") == eff["webhook"]["existingSecret"] and ref.get("key") == eff["webhook"]["secretKey"],
                  f"{tag} notifier webhook secret not from {eff['webhook']['existingSecret']}")
        if stage == "renderer":
            r = eff["stages"]["renderer"]
            want = r["image"] or None
            check(c["image"] == want if want else c["image"].endswith("-renderer"),
                  f"{tag} renderer image {c['image']} is not the image with Chromium")
            check(env.get("TRAWL_RENDER_CONCURRENCY", {}).get("value") == str(r["concurrency"]),
                  f"{tag} renderer tabs not its concurrency")
            vols = {v["name"]: v for v in spec["volumes"]}
            mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
            check(mounts.get("shm") == "/dev/shm" and vols.get("shm", {}).get("emptyDir", {}).get("medium") == "Memory",
                  f"{tag} renderer without a memory-backed /dev/shm for Chromium")
        limits = c.get("resources", {}).get("limits", {})
        if stage in ("indexer", "refiner"):
            gpu = eff["stages"][stage]["gpu"]
            if gpu["enabled"]:
                check(str(limits.get(gpu["resourceName"])) == str(gpu["count"]), f"{tag} {stage} GPU limit {limits}")
                check(c["image"].endswith("-cuda") or gpu["image"], f"{tag} GPU {stage} image {c['image']}")
                check(spec.get("tolerations"), f"{tag} GPU {stage} without tolerations")
                check(spec.get("nodeSelector"), f"{tag} GPU {stage} without node selector")
            else:
                check("nvidia.com/gpu" not in limits, f"{tag} {stage} GPU requested while off")
                check(not c["image"].endswith("-cuda"), f"{tag} {stage} on the CUDA image without a GPU")
        else:
            check("nvidia.com/gpu" not in limits, f"{tag} {stage} requests a GPU")
        if stage != "refiner":
            check(not REFINE_ENV & env.keys(), f"{tag} {stage} has the refiner's settings {REFINE_ENV & env.keys()}")
        else:
            check_refiner(tag, eff, spec, c, env)
        if stage == "ingester" or eff["archives"]["existingClaim"]:
            vols = {v["name"]: v for v in spec.get("volumes", [])}
            mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
            claim = eff["archives"]["existingClaim"]
            if stage == "ingester" and claim:
                check(vols.get("archives", {}).get("persistentVolumeClaim", {}).get("claimName") == claim
                      and mounts.get("archives", {}).get("mountPath") == eff["archives"]["mountPath"]
                      and mounts["archives"].get("readOnly") is True,
                      f"{tag} ingester archives not mounted read-only from {claim}")
            else:
                check("archives" not in vols, f"{tag} {stage} mounts the archives")
        if stage == "indexer":
            if eff["model"]["existingClaim"]:
                vols = {v["name"]: v for v in spec["volumes"]}
                check(vols.get("model", {}).get("persistentVolumeClaim", {}).get("claimName") == eff["model"]["existingClaim"],
                      f"{tag} model volume")
    cms = by_kind(docs, "ConfigMap")
    sp = eff["refine"]["systemPrompt"]
    made = bool(sp["text"] and not sp["path"] and not sp["existingConfigMap"] and eff["stages"]["refiner"]["enabled"])
    if check(("trawl-refine" in cms) == made, f"{tag} refiner prompt ConfigMap presence: want {made}") and made:
        check(cms["trawl-refine"]["data"] == {sp["key"]: sp["text"]}, f"{tag} refiner prompt ConfigMap content")
    cm = cms.get("trawl", {}).get("data", {})
    for key in ["TRAWL_NATS_URL", "TRAWL_METRICS_ADDR", "TRAWL_INDEX_URI", "TRAWL_MODEL_DIR", "TRAWL_CRAWL"]:
        check(key in cm, f"{tag} ConfigMap lacks {key}")
    check(("TRAWL_REDIS_URL" in cm) != bool(eff["redis"]["auth"]["existingSecret"]),
          f"{tag} Redis URL both in the ConfigMap and a Secret, or in neither")
    shards = eff["redis"].get("stateUrls") or []
    check(cm.get("TRAWL_REDIS_STATE_URLS", "") == ",".join(shards),
          f"{tag} the state shards' servers: {cm.get('TRAWL_REDIS_STATE_URLS')!r} for {shards}")
    services = by_kind(docs, "Service")
    for stage in STAGES:
        s = services.get(f"trawl-{stage}-metrics")
        check(s and s["spec"]["ports"][0]["port"] == eff["metrics"]["port"], f"{tag} metrics Service for {stage}")
    sm = by_kind(docs, "ServiceMonitor")
    check(bool(sm) == eff["metrics"]["serviceMonitor"]["enabled"], f"{tag} ServiceMonitor presence")
    for m in sm.values():
        check(m["spec"]["endpoints"][0]["path"] == "/metrics", f"{tag} ServiceMonitor path")
    scaled = by_kind(docs, "ScaledObject")
    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    for stage in ["ingester", "fetcher", "extractor", "renderer", "indexer", "refiner"]:
        auto = eff["stages"][stage]["autoscaling"]["enabled"]
        so = scaled.get(f"trawl-{stage}")
        hpa = hpas.get(f"trawl-{stage}")
        if keda and auto:
            if not check(so is not None, f"{tag} no ScaledObject for {stage}"):
                continue
            check(hpa is None, f"{tag} both an HPA and a ScaledObject for {stage}")
            check(so["spec"]["scaleTargetRef"]["name"] == f"trawl-{stage}", f"{tag} {stage} ScaledObject target")
            (t,) = so["spec"]["triggers"]
            md = t["metadata"]
            check(t["type"] == "nats-jetstream", f"{tag} {stage} trigger type {t['type']}")
            # KEDA runs in its own namespace: the chart's own cluster by its namespaced name.
            want = "trawl-nats.crawl.svc:8222" if eff["nats"]["deploy"]["enabled"] else eff["nats"]["monitoringEndpoint"]
            check(md.get("natsServerMonitoringEndpoint") == want, f"{tag} {stage} monitoring endpoint {md.get('natsServerMonitoringEndpoint')}")
            check(md.get("stream") == STREAMS[stage], f"{tag} {stage} stream {md.get('stream')}")
            check(md.get("consumer") == stage, f"{tag} {stage} consumer {md.get('consumer')}")
            check(md.get("lagThreshold") == str(eff["stages"][stage]["autoscaling"]["lagThreshold"]), f"{tag} {stage} lag threshold")
            check(md.get("account"), f"{tag} {stage} account")
            check(so["spec"]["maxReplicaCount"] == eff["stages"][stage]["autoscaling"]["maxReplicas"], f"{tag} {stage} max replicas")
            check(so["spec"]["minReplicaCount"] == eff["stages"][stage]["autoscaling"]["minReplicas"], f"{tag} {stage} min replicas")
        elif auto:
            check(so is None, f"{tag} ScaledObject for {stage} with KEDA off")
            check(hpa is not None, f"{tag} no HPA for {stage} with KEDA off")
        else:
            check(so is None and hpa is None, f"{tag} autoscaler for {stage} while off")
    api = eff["api"]
    dep = deployments.get("trawl-api")
    if check((dep is not None) == api["enabled"], f"{tag} API Deployment presence: want {api['enabled']}") and dep:
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        check(c["command"][:2] == ["/usr/local/bin/trawl", "serve"], f"{tag} API runs {c['command']}")
        check(f"0.0.0.0:{api['port']}" in c["command"], f"{tag} API does not listen on its port")
        on_cluster = "--cluster" in c["command"]
        check(on_cluster == api["cluster"], f"{tag} API --cluster: want {api['cluster']}")
        if on_cluster:
            i = c["command"].index("--cluster-crawl")
            check(c["command"][i + 1] == eff["crawl"], f"{tag} API jobs not on the release's crawl id")
            cm = by_kind(docs, "ConfigMap").get("trawl", {}).get("data", {})
            check("TRAWL_NATS_URL" in cm and c["envFrom"][0]["configMapRef"]["name"] == "trawl",
                  f"{tag} API on the cluster without the cluster's settings")
        check(dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate",
              f"{tag} API jobs are on its volume: one replica, replaced, not rolled")
        check(c["livenessProbe"]["httpGet"]["path"] == "/healthz", f"{tag} API liveness")
        check(c["securityContext"].get("readOnlyRootFilesystem") is True, f"{tag} API writable root")
        env = {e["name"]: e for e in c.get("env", [])}
        if api["auth"]["existingSecret"]:
            ref = env.get("TRAWL_API_KEYS", {}).get("valueFrom", {}).get("secretKeyRef", {})
            check(ref.get("name") == api["auth"]["existingSecret"] and ref.get("key") == api["auth"]["keysKey"],
                  f"{tag} API keys not from {api['auth']['existingSecret']}")
        else:
            check("TRAWL_API_KEYS" not in env, f"{tag} API keys set without a Secret")
        if eff["redis"]["auth"]["existingSecret"]:
            ref = env.get("TRAWL_REDIS_URL", {}).get("valueFrom", {}).get("secretKeyRef", {})
            check(ref.get("name") == eff["redis"]["auth"]["existingSecret"], f"{tag} API Redis URL not from the Secret")
        svc = services.get("trawl-api")
        check(svc is not None and svc["spec"]["ports"][0]["port"] == api["port"], f"{tag} API Service")
    pdbs = by_kind(docs, "PodDisruptionBudget")
    for stage in STAGES:
        want = eff["stages"][stage]["pdb"]["enabled"]
        check((f"trawl-{stage}" in pdbs) == want, f"{tag} PDB for {stage}: want {want}")
    check_nats(tag, eff, docs)
    return len(docs)


def main():
    lint = helm_python.lint(str(CHART))
    check(not lint["errors"], f"helm lint errors: {lint['errors']}")
    for m in lint["messages"]:
        check(m["severity"] < 3, f"helm lint: {m}")
    cases = [("default", {}, {})]
    for f in sorted((CHART / "ci").glob("*.yaml")):
        over = yaml.safe_load(f.read_text()) or {}
        cases.append((f.name, over, over))
    check(len(cases) >= 5, "fewer than four ci/ values files")
    # The NATS choices no ci/ file makes on its own.
    for name, over in [
        ("external NATS", {"nats": {"deploy": {"enabled": False}, "url": "nats://nats.messaging:4222"}}),
        ("one NATS server", {"nats": {"deploy": {"replicas": 1}}}),
        ("R5 on five servers", {"nats": {"deploy": {"replicas": 5}}, "queue": {"streamReplicas": 5}}),
        ("NATS token", {"nats": {"auth": {"existingSecret": "trawl-nats", "tokenKey": "token"}}}),
    ]:
        cases.append((name, over, over))
    base = yaml.safe_load((CHART / "values.yaml").read_text())
    check(base["nats"]["deploy"]["enabled"] and base["nats"]["deploy"]["replicas"] == 3,
          "NATS is not the chart's own three servers by default")
    check(base["queue"]["ackWaitSeconds"] == 30, "the default ack wait is not 30 s")
    for name, values, over in cases:
        n = check_case(name, values, over)
        print(f"{name}: {n} objects rendered")
    # The schema refuses what the chart cannot use.
    for bad, why in [
        ({"stages": {"fetcher": {"replicaCount": 3}}}, "unknown stage key"),
        ({"nats": {"monitoringEndpoint": "http://nats:8222"}}, "scheme in the monitoring endpoint"),
        ({"crawl": "has space"}, "crawl id with a space"),
        ({"keda": {"enabled": "yes"}}, "a string for a boolean"),
        ({"redis": {"url": "redis://r:6379", "stateUrls": ["redis://a:6379,redis://b:6379"]}},
         "two state servers in one entry"),
        ({"refine": {"engine": "gpt"}}, "an unknown refine engine"),
        ({"refine": {"endpoint": "vllm:8000/v1"}}, "a refine endpoint without a scheme"),
        ({"stages": {"refiner": {"gpu": {"enabled": True, "vram": 80}}}}, "an unknown refiner GPU key"),
        # Refused by the templates: settings the refiner would stop on at its start.
        ({"refine": {"engine": "candle", "systemPrompt": {"text": "p"}}}, "candle without a model"),
        ({"refine": {"engine": "openai", "systemPrompt": {"text": "p"}}}, "openai without an endpoint"),
        ({"refine": {"engine": "openai", "endpoint": "http://vllm:8000/v1"}}, "a model engine without a system prompt"),
        ({"stages": {"refiner": {"gpu": {"enabled": True}}}}, "GPU refiners with the extract engine"),
        ({"nats": {"deploy": {"replicas": 0}}}, "a NATS cluster of no server"),
        ({"nats": {"deploy": {"replica": 3}}}, "an unknown nats.deploy key"),
        ({"nats": {"deploy": {"storage": {"size": "lots"}}}}, "a NATS volume size that is no quantity"),
        ({"nats": {"deploy": {"enabled": False}}, "queue": {"streamReplicas": 6}}, "more stream copies than JetStream keeps"),
        ({"queue": {"streamReplicas": 0}}, "no copy of the streams"),
        ({"queue": {"claimLeaseSeconds": "10"}}, "a string for the claim lease"),
        # Refused by the templates: a NATS cluster that would not work as asked.
        ({"nats": {"deploy": {"lameDuckSeconds": 60}}}, "a NATS grace period shorter than lame duck mode"),
        ({"queue": {"claimLeaseSeconds": 900}}, "a claim lease longer than the claim's life"),
    ]:
        try:
            render(bad)
            failures.append(f"values.schema.json accepted {why}")
        except helm_python.HelmError:
            pass
    # More copies of the streams than the chart's servers: refused at render, saying why.
    try:
        render({"queue": {"streamReplicas": 5}})
        failures.append("the chart rendered 5 stream copies on its 3 NATS servers")
    except helm_python.HelmError as e:
        check("queue.streamReplicas 5" in str(e) and "nats.deploy.replicas 3" in str(e),
              f"5 stream copies on 3 servers refused without saying why: {e}")
    if failures:
        print("\n".join(f"FAIL {f}" for f in failures))
        sys.exit(1)
    print(f"chart: ok ({len(cases)} values sets)")


if __name__ == "__main__":
    main()
