// Validates Kubernetes objects against the API's OpenAPI schemas (npm kubernetes-models) and the
// Prometheus Operator's CRD schemas (npm @kubernetes-models/prometheus-operator): the objects
// come as one JSON array on stdin (tests/deploy/test_kubernetes.py parses what `kubectl
// kustomize` renders), each error is printed as "KIND/NAME: message", and the exit status is the
// number of invalid objects (at most 100). An object of a kind no schema here knows is an error
// too, so a typo in apiVersion cannot pass unchecked.
import * as core from "kubernetes-models/v1";
import * as apps from "kubernetes-models/apps/v1";
import * as batch from "kubernetes-models/batch/v1";
import * as policy from "kubernetes-models/policy/v1";
import * as monitoring from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";

const models = {
  v1: core,
  "apps/v1": apps,
  "batch/v1": batch,
  "policy/v1": policy,
  "monitoring.coreos.com/v1": monitoring,
};

let input = "";
for await (const chunk of process.stdin) input += chunk;
let invalid = 0;
for (const object of JSON.parse(input)) {
  const name = `${object.kind}/${object.metadata?.name}`;
  const Model = models[object.apiVersion]?.[object.kind];
  if (!Model) {
    console.log(`${name}: no schema for apiVersion ${object.apiVersion} kind ${object.kind}`);
    invalid++;
    continue;
  }
  try {
    new Model(object).validate();
  } catch (error) {
    console.log(`${name}: ${error.message}`);
    invalid++;
  }
}
console.log(`${invalid} invalid`);
process.exit(Math.min(invalid, 100));
