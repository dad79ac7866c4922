"""Renders a kustomize base the way `kustomize build` does, for the subset deploy/kubernetes uses: resources,
namespace, labels (pairs, includeSelectors, includeTemplates), images and configMapGenerator (files, with
kustomize's content-hash suffix and the references to the ConfigMap renamed). No kustomize binary is
installable here. Any other key of kustomization.yaml is an error, so a feature this renderer does not
apply can never be silently skipped by the tests.

Usage: kustomize_render.py DIR OUT.yaml   (writes the rendered multi-document YAML, prints it as JSON)
"""

import hashlib
import json
import os
import sys

import yaml

SUPPORTED = {"apiVersion", "kind", "namespace", "labels", "resources", "configMapGenerator", "images"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
                  "CustomResourceDefinition", "PersistentVolume", "StorageClass"}
WORKLOADS = {"DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job"}


def fail(message):
    sys.exit(f"kustomize_render: {message}")


def config_map_hash(cm):
    """kustomize's suffix (api/hasher): sha256 of the JSON of kind, name and data, first 10 hex digits
    with 0, 1, 3, a and e replaced so the suffix never reads as a number or a word."""
    encoded = json.dumps({"kind": "ConfigMap", "name": cm["metadata"]["name"], "data": cm["data"]},
                         sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # Go's encoding/json escapes these three.
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    digest = hashlib.sha256(encoded.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"}))


def generate_config_maps(base, generators):
    made, renames = [], {}
    for gen in generators:
        unknown = set(gen) - {"name", "files"}
        if unknown:
            fail(f"configMapGenerator keys {sorted(unknown)} are not supported")
        data = {}
        for entry in gen["files"]:
            key, path = entry.split("=", 1) if "=" in entry else (os.path.basename(entry), entry)
            with open(os.path.join(base, path), encoding="utf-8") as f:
                data[key] = f.read()
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data}
        hashed = f"{gen['name']}-{config_map_hash(cm)}"
        renames[gen["name"]] = hashed
        cm["metadata"]["name"] = hashed
        made.append(cm)
    return made, renames


def pod_spec(resource):
    if resource["kind"] in WORKLOADS:
        return resource["spec"]["template"]["spec"]
    if resource["kind"] == "Pod":
        return resource["spec"]
    return None


def rename_config_map_refs(spec, renames):
    for volume in spec.get("volumes", []):
        ref = volume.get("configMap")
        if ref and ref.get("name") in renames:
            ref["name"] = renames[ref["name"]]
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        for source in container.get("envFrom", []):
            ref = source.get("configMapRef")
            if ref and ref.get("name") in renames:
                ref["name"] = renames[ref["name"]]
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("configMapKeyRef")
            if ref and ref.get("name") in renames:
                ref["name"] = renames[ref["name"]]


def set_image(spec, images):
    for container in spec.get("containers", []) + spec.get("initContainers", []):
        name, _, tag = container["image"].partition(":")
        for image in images:
            unknown = set(image) - {"name", "newName", "newTag", "digest"}
            if unknown:
                fail(f"images keys {sorted(unknown)} are not supported")
            if image["name"] != name:
                continue
            new_name, new_tag = image.get("newName", name), image.get("newTag", tag)
            if "digest" in image:
                container["image"] = f"{new_name}@{image['digest']}"
            else:
                container["image"] = f"{new_name}:{new_tag}" if new_tag else new_name


def apply_labels(resource, entries):
    for entry in entries:
        unknown = set(entry) - {"pairs", "includeSelectors", "includeTemplates"}
        if unknown:
            fail(f"labels keys {sorted(unknown)} are not supported")
        pairs = entry["pairs"]
        resource["metadata"].setdefault("labels", {}).update(pairs)
        if resource["kind"] in WORKLOADS:
            template = resource["spec"]["template"]["metadata"]
            if entry.get("includeTemplates") or entry.get("includeSelectors"):
                template.setdefault("labels", {}).update(pairs)
            if entry.get("includeSelectors"):
                resource["spec"]["selector"].setdefault("matchLabels", {}).update(pairs)


def render(base):
    with open(os.path.join(base, "kustomization.yaml"), encoding="utf-8") as f:
        kustomization = yaml.safe_load(f)
    unknown = set(kustomization) - SUPPORTED
    if unknown:
        fail(f"kustomization keys {sorted(unknown)} are not supported by this renderer")
    resources = []
    for name in kustomization.get("resources", []):
        with open(os.path.join(base, name), encoding="utf-8") as f:
            resources.extend(doc for doc in yaml.safe_load_all(f) if doc)
    generated, renames = generate_config_maps(base, kustomization.get("configMapGenerator", []))
    resources.extend(generated)
    namespace = kustomization.get("namespace")
    for resource in resources:
        if namespace and resource["kind"] not in CLUSTER_SCOPED:
            resource["metadata"]["namespace"] = namespace
        if namespace and resource["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in resource.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace
        apply_labels(resource, kustomization.get("labels", []))
        spec = pod_spec(resource)
        if spec is not None:
            rename_config_map_refs(spec, renames)
            set_image(spec, kustomization.get("images", []))
    return resources


def main():
    base, out = sys.argv[1], sys.argv[2]
    resources = render(base)
    with open(out, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(resources, f, sort_keys=False)
    json.dump(resources, sys.stdout)


if __name__ == "__main__":
    main()
