"""The Kubernetes manifests (deploy/kubernetes/): every overlay renders with `kubectl kustomize`,
every rendered object validates against the Kubernetes and Prometheus Operator schemas
(validate_manifests.mjs, npm kubernetes-models), a broken fixture fails that validation, and the
objects say what docs/operations.md promises: probes on /healthz, a securityContext as strict as
the systemd unit's, selectors that select the pods, the PrometheusRule equal to the rules promtool
tests. No cluster is needed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
KUBE = os.path.join(REPO, "deploy", "kubernetes")
VALIDATOR = os.path.join(HERE, "validate_manifests.mjs")
BROKEN = os.path.join(HERE, "fixtures", "kubernetes-broken")
RULES = os.path.join(REPO, "deploy", "prometheus", "sluice.rules.yml")
OVERLAYS = ("overlays/single", "overlays/fleet", "monitoring")
# The image's user (Containerfile, SLUICE_UID).
SLUICE_UID = 999


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


def require_tools():
    if shutil.which("kubectl") is None:
        raise unittest.SkipTest("no kubectl (Kustomize v4 or later): scripts/install-deps.sh test")
    version = run(["kubectl", "version", "--client"]).stdout
    match = re.search(r"Kustomize Version: v(\d+)", version)
    # Debian 12's kubernetes-client (1.20) embeds Kustomize 2.0, which has no `patches` nor
    # `labels`.
    if not match or int(match.group(1)) < 4:
        raise unittest.SkipTest(f"kubectl's Kustomize is older than v4:\n{version}")
    if shutil.which("node") is None or not os.path.isdir(
            os.path.join(REPO, "node_modules", "kubernetes-models")):
        raise unittest.SkipTest("no node or node_modules/kubernetes-models: npm ci")


_rendered = {}


def render(path):
    """The objects `kubectl kustomize path` renders (once per run: a render takes seconds)."""
    if path not in _rendered:
        _rendered[path] = _render(path)
    return _rendered[path]


def _render(path):
    result = run(["kubectl", "kustomize", path])
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {path}:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def validate(objects):
    """(exit status, output) of the schema validation of `objects`."""
    result = run(["node", VALIDATOR], input=json.dumps(objects), cwd=REPO)
    return result.returncode, result.stdout + result.stderr


def find(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or
                                                          o["metadata"]["name"] == name)]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} {kind} {name or ''} in "
                             f"{[(o['kind'], o['metadata']['name']) for o in objects]}")
    return found[0]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class RenderAndValidateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tools()
        cls.rendered = {path: render(os.path.join(KUBE, path)) for path in OVERLAYS}

    def test_every_overlay_renders_and_validates(self):
        for path, objects in self.rendered.items():
            with self.subTest(path):
                status, output = validate(objects)
                self.assertEqual(status, 0, output)
                self.assertIn("0 invalid", output)

    def test_a_broken_manifest_fails_the_validation(self):
        status, output = validate(render(BROKEN))
        self.assertNotEqual(status, 0, output)
        self.assertIn("spec/replicas must be integer", output)
        self.assertIn("livenessProbe/periodSeconds must be integer", output)

    def test_an_unknown_kind_fails_the_validation(self):
        objects = self.rendered["overlays/single"] + [
            {"apiVersion": "apps/v1", "kind": "Deploymnet", "metadata": {"name": "typo"}}]
        status, output = validate(objects)
        self.assertEqual(status, 1, output)
        self.assertIn("Deploymnet/typo: no schema", output)


class WhatTheObjectsSayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tools()
        cls.rendered = {path: render(os.path.join(KUBE, path)) for path in OVERLAYS}

    def pod(self, overlay):
        return find(self.rendered[overlay], "Deployment", "sluice")["spec"]["template"]

    def test_probes_are_on_healthz(self):
        container = self.pod("overlays/single")["spec"]["containers"][0]
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            self.assertEqual(container[probe]["httpGet"]["path"], "/healthz", probe)
            self.assertEqual(container[probe]["httpGet"]["port"], "http", probe)
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        self.assertEqual(ports, {"http": 8080, "admin": 8081})

    def test_the_security_context_is_as_strict_as_the_unit(self):
        for overlay in ("overlays/single", "overlays/fleet"):
            spec = self.pod(overlay)["spec"]
            pod = spec["securityContext"]
            self.assertTrue(pod["runAsNonRoot"])
            self.assertEqual((pod["runAsUser"], pod["runAsGroup"]), (SLUICE_UID, SLUICE_UID))
            self.assertEqual(pod["seccompProfile"]["type"], "RuntimeDefault")
            self.assertFalse(spec["automountServiceAccountToken"])
            container = spec["containers"][0]["securityContext"]
            self.assertFalse(container["allowPrivilegeEscalation"])  # NoNewPrivileges=yes
            self.assertTrue(container["readOnlyRootFilesystem"])  # ProtectSystem=strict
            self.assertEqual(container["capabilities"]["drop"], ["ALL"])  # CapabilityBoundingSet=
            mounts = {m["mountPath"]: m.get("readOnly", False)
                      for m in spec["containers"][0]["volumeMounts"]}
            # ReadWritePaths=/var/lib/sluice: the one writable mount.
            self.assertEqual([p for p, ro in mounts.items() if not ro], ["/var/lib/sluice"])

    def test_selectors_select_the_pods(self):
        for overlay in ("overlays/single", "overlays/fleet"):
            objects = self.rendered[overlay]
            labels = self.pod(overlay)["metadata"]["labels"]
            deployment = find(objects, "Deployment", "sluice")
            self.assertTrue(selects(deployment["spec"]["selector"]["matchLabels"], labels))
            self.assertTrue(selects(find(objects, "Service")["spec"]["selector"], labels))
            self.assertTrue(selects(
                find(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels))
        service = find(self.rendered["overlays/single"], "Service")
        monitor = find(self.rendered["monitoring"], "ServiceMonitor")
        self.assertTrue(selects(monitor["spec"]["selector"]["matchLabels"],
                                service["metadata"]["labels"]))
        self.assertIn(monitor["spec"]["endpoints"][0]["port"],
                      [p["name"] for p in service["spec"]["ports"]])

    def test_the_config_map_is_the_toml_file_mounted_where_the_image_reads_it(self):
        objects = self.rendered["overlays/single"]
        config = find(objects, "ConfigMap")
        with open(os.path.join(KUBE, "base", "sluice.toml")) as f:
            self.assertEqual(config["data"]["sluice.toml"], f.read())
        spec = self.pod("overlays/single")["spec"]
        volume = [v for v in spec["volumes"] if v.get("configMap")][0]
        self.assertEqual(volume["configMap"]["name"], config["metadata"]["name"])
        mount = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        # The image's SLUICE_CONFIG (Containerfile).
        self.assertEqual(mount[0]["mountPath"], "/etc/sluice")

    def test_single_is_one_replica_on_a_claim(self):
        objects = self.rendered["overlays/single"]
        deployment = find(objects, "Deployment", "sluice")
        self.assertEqual(deployment["spec"]["replicas"], 1)
        # A rolling update would start a second pod on the locked data dir.
        self.assertEqual(deployment["spec"]["strategy"]["type"], "Recreate")
        data = [v for v in deployment["spec"]["template"]["spec"]["volumes"]
                if v["name"] == "data"][0]
        self.assertEqual(data, {"name": "data",
                                "persistentVolumeClaim": {"claimName": "sluice-data"}})
        find(objects, "PersistentVolumeClaim", "sluice-data")

    def test_fleet_takes_its_urls_from_secrets_and_migrates_in_a_job(self):
        objects = self.rendered["overlays/fleet"]
        deployment = find(objects, "Deployment", "sluice")
        self.assertGreater(deployment["spec"]["replicas"], 1)
        env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        for name in ("SLUICE_META", "SLUICE_CACHE", "SLUICE_BLOB", "AWS_SECRET_ACCESS_KEY"):
            self.assertEqual(env[name]["valueFrom"]["secretKeyRef"]["name"], "sluice-backends")
        job = find(objects, "Job", "sluice-migrate")
        container = job["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["args"], ["migrate"])
        self.assertEqual(container["image"],
                         deployment["spec"]["template"]["spec"]["containers"][0]["image"])


class PrometheusRuleTest(unittest.TestCase):
    """The PrometheusRule is tools/render_prometheusrule.py's output, whose groups are the rules
    file's: the alerts a cluster gets are those promtool tests (scripts/check-alert-rules.sh)."""

    def test_the_committed_rule_is_the_generated_one(self):
        generated = run([sys.executable, os.path.join(REPO, "tools", "render_prometheusrule.py")])
        self.assertEqual(generated.returncode, 0, generated.stderr)
        with open(os.path.join(KUBE, "monitoring", "prometheusrule.yaml")) as f:
            self.assertEqual(f.read(), generated.stdout,
                             "stale: python3 tools/render_prometheusrule.py > "
                             "deploy/kubernetes/monitoring/prometheusrule.yaml")

    def test_its_groups_are_the_rules_file(self):
        with open(os.path.join(KUBE, "monitoring", "prometheusrule.yaml")) as f:
            rule = yaml.safe_load(f)
        with open(RULES) as f:
            self.assertEqual(rule["spec"]["groups"], yaml.safe_load(f)["groups"])

    def test_promtool_accepts_its_groups(self):
        if shutil.which("promtool") is None:
            self.skipTest("no promtool: scripts/install-deps.sh test")
        with open(os.path.join(KUBE, "monitoring", "prometheusrule.yaml")) as f:
            rule = yaml.safe_load(f)
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as rules:
            yaml.safe_dump({"groups": rule["spec"]["groups"]}, rules)
            rules.flush()
            checked = run(["promtool", "check", "rules", rules.name])
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)


if __name__ == "__main__":
    unittest.main()
