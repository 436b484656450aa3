#!/usr/bin/env python3
"""Writes required-1.8.0.json: what the OCSF schema 1.8.0 requires of the
event classes maiden's `audit export -format ocsf` writes, read from a clone
of github.com/ocsf/ocsf-schema (branch v1.8.0, whose version.json says
1.8.0). The schema is not downloadable from the test machines, so the test
reads this file; run this script again to refresh it:

    git clone -b v1.8.0 https://github.com/ocsf/ocsf-schema /tmp/ocsf-schema
    python3 gen.py /tmp/ocsf-schema > required-1.8.0.json

A class's required attributes are those with "requirement": "required" in
its file and the files it extends (base_event, the category's event); an
object's are its own and its ancestors' required attributes and their
"at_least_one" constraints. Only the objects the export writes are listed.
"""
import json, os, sys

root = sys.argv[1]

def load(path):
    with open(os.path.join(root, path)) as f:
        return json.load(f)

def chain(kind, name):
    """The file of name and of everything it extends, most derived first."""
    out = []
    while name:
        d = load(f"{kind}/{name}.json")
        out.append(d)
        name = d.get("extends")
        if name in ("object",):
            break
    return out

def required(docs):
    req = set()
    for d in docs:
        for k, v in d.get("attributes", {}).items():
            if isinstance(v, dict) and v.get("requirement") == "required":
                req.add(k)
    return sorted(req)

version = load("version.json")["version"]
categories = {k: v["uid"] for k, v in load("categories.json")["attributes"].items()}
dictionary = load("dictionary.json")["attributes"]

classes = {}
for path in ("events/application/api_activity.json", "events/iam/user_access.json"):
    d = load(path)
    docs = [d]
    parent = d.get("extends")
    while parent:
        base = load("events/base_event.json") if parent == "base_event" else load(f"events/{parent}/{parent}.json") if os.path.exists(os.path.join(root, f"events/{parent}/{parent}.json")) else load(f"events/{path.split('/')[1]}/{parent}.json")
        docs.append(base)
        parent = base.get("extends")
    category = next(x.get("category") for x in docs if x.get("category"))
    cat_uid = categories[category]
    classes[str(cat_uid * 1000 + d["uid"])] = {"name": d["name"], "category_uid": cat_uid, "required": required(docs)}

objects = {}
for name in ("metadata", "product", "actor", "api", "network_endpoint", "user", "trace"):
    docs = chain("objects", name)
    one = []
    for d in docs:
        one += d.get("constraints", {}).get("at_least_one", []) if not one else []
    objects[name] = {"required": required(docs), "at_least_one": one}

attrs = {k: dictionary[k]["type"] for k in ("metadata", "actor", "api", "src_endpoint", "user", "trace")}
attrs["metadata.product"] = "product"
attrs["actor.user"] = "user"

json.dump({
    "source": f"github.com/ocsf/ocsf-schema branch v1.8.0 (version.json {version}): events/base_event.json, "
              "events/application/{application,api_activity}.json, events/iam/{iam,user_access}.json, objects/*.json, "
              "dictionary.json, categories.json; written by gen.py",
    "version": version,
    "classes": classes,
    "objects": objects,
    "attribute_objects": attrs,
}, sys.stdout, indent=2, sort_keys=True)
print()
