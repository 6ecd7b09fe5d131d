//! The deployment files under deploy/: the Kubernetes manifests that
//! deploy/kubernetes/kustomization.yaml lists, the overlays' patches and the Containerfile.
//! deploy/check.sh validates them against the Kubernetes schemas; these tests check what a schema
//! cannot: that the pieces agree with each other and with the node (its options, its health
//! routes, its shutdown bound, its user).
//!
//! The files are read as text from the source tree, so the tests need no cluster and no tools.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// Where the node keeps its data in the image and in the pods.
const DATA_DIR: &str = "/var/lib/annal";
/// The node's HTTP port (health probes, clients).
const HTTP_PORT: i64 = 2113;
/// The Kubernetes default grace period, which the node's default shutdown bound is made to fit.
const MIN_GRACE_SECONDS: i64 = 30;
/// `--shutdown-timeout`'s default, in seconds (src/config/options.rs).
const DEFAULT_SHUTDOWN_TIMEOUT: i64 = 25;
/// The numeric user and group the image and the pods run as.
const UID: i64 = 1001;

// --- reading ---------------------------------------------------------------------------------

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The YAML documents of a file (several when separated by `---`), as JSON values; empty
/// documents are skipped.
fn documents(path: &Path) -> Vec<Value> {
    let text = read(path);
    let mut out = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(&text).enumerate() {
        let value = Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("{}: document {} is not valid YAML: {e}", path.display(), i + 1));
        if !value.is_null() {
            out.push(value);
        }
    }
    out
}

/// One manifest: the file it came from and the document.
struct Doc {
    file: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }

    fn name(&self) -> &str {
        self.value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
    }
}

/// The file names a kustomization lists under `key` (resources or patches[].path), resolved
/// against its directory; directories and remote bases are left out.
fn kustomization_files(dir: &Path, key: &str) -> Vec<(String, PathBuf)> {
    let path = dir.join("kustomization.yaml");
    let docs = documents(&path);
    let kustomization = docs.first().unwrap_or_else(|| panic!("{} is empty", path.display()));
    let Some(entries) = kustomization.get(key).and_then(Value::as_array) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| match e {
            Value::String(s) => Some(s.clone()),
            Value::Object(m) => m.get("path").and_then(Value::as_str).map(str::to_string),
            _ => None,
        })
        .map(|name| {
            let file = dir.join(&name);
            (name, file)
        })
        .filter(|(_, file)| !file.is_dir())
        .collect()
}

/// Every document of every file deploy/kubernetes/kustomization.yaml lists as a resource.
fn manifests() -> Vec<Doc> {
    let dir = deploy_dir().join("kubernetes");
    let files = kustomization_files(&dir, "resources");
    assert!(!files.is_empty(), "deploy/kubernetes/kustomization.yaml lists no resource files");
    let mut out = Vec::new();
    for (name, path) in files {
        assert!(
            path.is_file(),
            "deploy/kubernetes/kustomization.yaml lists {name}, which is not a file in deploy/kubernetes"
        );
        let docs = documents(&path);
        assert!(!docs.is_empty(), "deploy/kubernetes/{name} holds no manifest");
        for value in docs {
            assert!(
                value["kind"].is_string() && value["apiVersion"].is_string(),
                "deploy/kubernetes/{name}: a document without kind and apiVersion: {value}"
            );
            out.push(Doc { file: format!("deploy/kubernetes/{name}"), value });
        }
    }
    out
}

/// Every document of the patches and resource files of each overlay in deploy/overlays/.
fn overlay_documents() -> Vec<Doc> {
    let root = deploy_dir().join("overlays");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&root) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> =
        entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        if !dir.join("kustomization.yaml").is_file() {
            continue;
        }
        for key in ["resources", "patches"] {
            for (name, path) in kustomization_files(&dir, key) {
                for value in documents(&path) {
                    let overlay =
                        dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    out.push(Doc { file: format!("deploy/overlays/{overlay}/{name}"), value });
                }
            }
        }
    }
    out
}

/// The single document of `kind` named `name` (any name when `None`).
fn the<'a>(docs: &'a [Doc], kind: &str, name: Option<&str>) -> &'a Doc {
    let found: Vec<&Doc> =
        docs.iter().filter(|d| d.kind() == kind && name.is_none_or(|n| d.name() == n)).collect();
    match found.as_slice() {
        [one] => one,
        [] => panic!("no {kind}{} in the manifests", name.map(|n| format!(" named {n}")).unwrap_or_default()),
        many => panic!(
            "{} {kind}s in the manifests where one was expected: {:?}",
            many.len(),
            many.iter().map(|d| format!("{} ({})", d.name(), d.file)).collect::<Vec<_>>()
        ),
    }
}

fn at<'a>(doc: &'a Doc, pointer: &str) -> &'a Value {
    doc.value
        .pointer(pointer)
        .unwrap_or_else(|| panic!("{} {} ({}): no {pointer}", doc.kind(), doc.name(), doc.file))
}

fn statefulset(docs: &[Doc]) -> &Doc {
    the(docs, "StatefulSet", None)
}

/// The StatefulSet's container running the node (its image names annal, or it is the only one).
fn node_container(sts: &Doc) -> &Value {
    let containers = at(sts, "/spec/template/spec/containers").as_array().expect("containers is not a list");
    let by_image: Vec<&Value> =
        containers.iter().filter(|c| c["image"].as_str().is_some_and(|i| i.contains("annal"))).collect();
    match (by_image.as_slice(), containers.as_slice()) {
        ([one], _) => one,
        (_, [only]) => only,
        _ => panic!("cannot tell which of the StatefulSet's {} containers runs annal", containers.len()),
    }
}

/// The value of the environment variable `name` of `container` (`None` when unset or taken
/// from elsewhere, such as the downward API).
fn env(container: &Value, name: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
        .map(str::to_string)
}

fn env_int(container: &Value, name: &str) -> Option<i64> {
    env(container, name)
        .map(|v| v.parse::<i64>().unwrap_or_else(|_| panic!("{name}={v:?} is not an integer")))
}

/// Every pod spec in a document: any object with a `containers` list, at any depth (a
/// StatefulSet's template, a CronJob's job template, a patch of either).
fn pod_specs(value: &Value) -> Vec<&Value> {
    fn walk<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        match v {
            Value::Object(m) => {
                if m.get("containers").is_some_and(Value::is_array) {
                    out.push(v);
                }
                for x in m.values() {
                    walk(x, out);
                }
            }
            Value::Array(a) => {
                for x in a {
                    walk(x, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut out);
    out
}

fn containers_of(pod_spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers"].into_iter().filter_map(move |k| pod_spec[k].as_array()).flatten()
}

/// `port` of a probe or a Service's targetPort: a number, or the name of a container port.
fn resolve_port(container: &Value, port: &Value) -> Option<i64> {
    match port {
        Value::Number(n) => n.as_i64(),
        Value::String(name) => container["ports"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name.as_str())
            .and_then(|p| p["containerPort"].as_i64()),
        _ => None,
    }
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    let Some(selector) = selector.as_object() else { return false };
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The Containerfile's instructions, continuation lines joined and comments dropped:
/// (INSTRUCTION, arguments).
fn containerfile() -> Vec<(String, String)> {
    let text = read(&deploy_dir().join("Containerfile"));
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(part) = trimmed.strip_suffix('\\') {
            pending.push_str(part);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let full = std::mem::take(&mut pending);
        let (instruction, args) = full.split_once(char::is_whitespace).unwrap_or((full.as_str(), ""));
        out.push((instruction.to_ascii_uppercase(), args.trim().to_string()));
    }
    assert!(pending.is_empty(), "deploy/Containerfile ends inside a continued line");
    out
}

fn instructions(all: &[(String, String)], name: &str) -> Vec<String> {
    all.iter().filter(|(i, _)| i == name).map(|(_, a)| a.clone()).collect()
}

// --- the tests -------------------------------------------------------------------------------

#[test]
fn kustomization_lists_the_cluster_pieces() {
    let docs = manifests();
    let kinds: BTreeSet<&str> = docs.iter().map(Doc::kind).collect();
    for kind in ["StatefulSet", "Service", "PodDisruptionBudget", "CronJob"] {
        assert!(
            kinds.contains(kind),
            "deploy/kubernetes/kustomization.yaml lists no {kind}; it lists {kinds:?}"
        );
    }
    for doc in &docs {
        assert!(
            doc.value.pointer("/metadata/namespace").is_none(),
            "{} {} ({}) names a namespace: the manifests are namespace-agnostic (kubectl -n picks one)",
            doc.kind(),
            doc.name(),
            doc.file
        );
    }
}

#[test]
fn statefulset_is_governed_by_a_headless_service_publishing_not_ready_pods() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let service_name = at(sts, "/spec/serviceName").as_str().expect("serviceName is not a string");
    let service = the(&docs, "Service", Some(service_name));
    assert_eq!(
        service.value.pointer("/spec/clusterIP").and_then(Value::as_str),
        Some("None"),
        "Service {service_name} (the StatefulSet's serviceName) must be headless (clusterIP: None), \
         so the cluster DNS name resolves to every pod"
    );
    assert_eq!(
        service.value.pointer("/spec/publishNotReadyAddresses").and_then(Value::as_bool),
        Some(true),
        "Service {service_name} must publish not-ready pods: nodes discover each other through it \
         before any of them is ready (readiness needs an elected leader)"
    );
    let pod_labels = at(sts, "/spec/template/metadata/labels");
    assert!(
        labels_match(at(service, "/spec/selector"), pod_labels),
        "Service {service_name}'s selector {} does not select the StatefulSet's pods {pod_labels}",
        at(service, "/spec/selector")
    );
    let container = node_container(sts);
    for (name, port) in [("http", HTTP_PORT), ("replication", 1112)] {
        let p = at(service, "/spec/ports")
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .unwrap_or_else(|| panic!("Service {service_name} has no port named {name}"));
        let target = resolve_port(container, p.get("targetPort").unwrap_or(&p["port"]));
        assert_eq!(
            target,
            Some(port),
            "Service {service_name}'s port {name} must lead to the container's port {port}"
        );
    }
}

#[test]
fn statefulset_starts_every_node_at_once_and_sizes_the_cluster() {
    let docs = manifests();
    let sts = statefulset(&docs);
    assert_eq!(
        at(sts, "/spec/podManagementPolicy").as_str(),
        Some("Parallel"),
        "podManagementPolicy must be Parallel: with OrderedReady, annal-1 waits for annal-0 to be \
         ready, which needs a leader, which needs a majority running"
    );
    assert_eq!(
        sts.value.pointer("/spec/updateStrategy/type").and_then(Value::as_str),
        Some("RollingUpdate"),
        "updateStrategy must be RollingUpdate (one node at a time)"
    );
    let replicas = at(sts, "/spec/replicas").as_i64().expect("replicas is not an integer");
    let container = node_container(sts);
    assert_eq!(
        env_int(container, "ANNAL_CLUSTER_SIZE"),
        Some(replicas),
        "ANNAL_CLUSTER_SIZE must equal replicas ({replicas}): change them together"
    );
}

#[test]
fn nodes_discover_each_other_through_the_headless_service() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let service = at(sts, "/spec/serviceName").as_str().expect("serviceName is not a string");
    let container = node_container(sts);
    assert_eq!(env(container, "ANNAL_DISCOVER_VIA_DNS").as_deref(), Some("true"), "ANNAL_DISCOVER_VIA_DNS");
    let dns = env(container, "ANNAL_CLUSTER_DNS").expect("ANNAL_CLUSTER_DNS is not set");
    assert!(
        dns.starts_with(&format!("{service}.$(POD_NAMESPACE).svc.")),
        "ANNAL_CLUSTER_DNS={dns:?} must name the headless Service {service} in the pod's namespace"
    );
    let replication = resolve_port(container, &Value::from("replication"))
        .expect("the container has no port named replication");
    assert_eq!(
        env_int(container, "ANNAL_CLUSTER_GOSSIP_PORT"),
        Some(replication),
        "ANNAL_CLUSTER_GOSSIP_PORT must be the replication port ({replication}): gossip travels on it"
    );
    if let Some(port) = env_int(container, "ANNAL_REPLICATION_PORT") {
        assert_eq!(port, replication, "ANNAL_REPLICATION_PORT must be the container's replication port");
    }
    for name in ["ANNAL_REPLICATION_HOST_ADVERTISE_AS", "ANNAL_NODE_HOST_ADVERTISE_AS"] {
        if let Some(v) = env(container, name) {
            assert!(
                v.starts_with(&format!("$(POD_NAME).{service}.")) || v == "$(POD_IP)",
                "{name}={v:?} must be the pod's stable name under the Service {service} (or its IP)"
            );
        }
    }
}

#[test]
fn probes_use_the_health_routes_on_the_http_port() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let container = node_container(sts);
    let http_port = env_int(container, "ANNAL_HTTP_PORT").unwrap_or(HTTP_PORT);
    let tls = env(container, "ANNAL_CERTIFICATE_FILE").is_some();
    for (probe, path) in [
        ("startupProbe", "/health/live"),
        ("livenessProbe", "/health/live"),
        ("readinessProbe", "/health/ready"),
    ] {
        let get = container
            .get(probe)
            .and_then(|p| p.get("httpGet"))
            .unwrap_or_else(|| panic!("the annal container has no {probe} with httpGet"));
        assert_eq!(get["path"].as_str(), Some(path), "{probe} must ask {path}");
        assert_eq!(
            resolve_port(container, &get["port"]),
            Some(http_port),
            "{probe} must ask the HTTP port {http_port} (got port {})",
            get["port"]
        );
        let scheme = get["scheme"].as_str().unwrap_or("HTTP");
        assert_eq!(
            scheme,
            if tls { "HTTPS" } else { "HTTP" },
            "{probe}: the node serves {} only, so the probe's scheme must match",
            if tls { "HTTPS (ANNAL_CERTIFICATE_FILE is set)" } else { "plain HTTP" }
        );
    }
}

#[test]
fn grace_period_outlasts_the_shutdown_timeout() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let grace = sts
        .value
        .pointer("/spec/template/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(MIN_GRACE_SECONDS);
    assert!(grace >= MIN_GRACE_SECONDS, "terminationGracePeriodSeconds {grace} is below {MIN_GRACE_SECONDS}");
    let timeout = env_int(node_container(sts), "ANNAL_SHUTDOWN_TIMEOUT").unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT);
    assert!(
        grace > timeout,
        "terminationGracePeriodSeconds ({grace}) must exceed the node's shutdown timeout ({timeout} s), \
         or the kubelet's SIGKILL can cut a leader's hand-over"
    );
}

#[test]
fn pods_run_unprivileged_on_a_read_only_root() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let pod = at(sts, "/spec/template/spec");
    let container = node_container(sts);
    let either =
        move |key: &str| container["securityContext"].get(key).or_else(|| pod["securityContext"].get(key));
    assert_eq!(either("runAsNonRoot").and_then(Value::as_bool), Some(true), "runAsNonRoot must be true");
    assert_eq!(
        either("runAsUser").and_then(Value::as_i64),
        Some(UID),
        "runAsUser must be {UID}, the image's user (the data directory in the image belongs to it)"
    );
    assert_eq!(
        pod.pointer("/securityContext/fsGroup").and_then(Value::as_i64),
        Some(UID),
        "fsGroup must be {UID}, so the volume and the mounted Secret's files are the node's group's"
    );
    let sc = &container["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "readOnlyRootFilesystem must be true");
    assert_eq!(
        sc["allowPrivilegeEscalation"].as_bool(),
        Some(false),
        "allowPrivilegeEscalation must be false"
    );
    let drops: Vec<&str> = sc
        .pointer("/capabilities/drop")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(drops.contains(&"ALL"), "the container must drop ALL capabilities (drops {drops:?})");
}

#[test]
fn data_directory_is_a_claim_from_the_volume_claim_templates() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let container = node_container(sts);
    let db = env(container, "ANNAL_DB").unwrap_or_else(|| DATA_DIR.to_string());
    assert_eq!(db, DATA_DIR, "ANNAL_DB must be {DATA_DIR}, the volume's mount point and the image's volume");
    let mount = container["volumeMounts"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["mountPath"] == DATA_DIR))
        .unwrap_or_else(|| panic!("nothing is mounted at {DATA_DIR}: the root file system is read-only"));
    assert_ne!(mount["readOnly"].as_bool(), Some(true), "the mount at {DATA_DIR} must be writable");
    assert!(mount.get("subPath").is_none(), "the data volume must be mounted whole");
    let name = mount["name"].as_str().expect("a volume mount without a name");
    let templates =
        at(sts, "/spec/volumeClaimTemplates").as_array().expect("volumeClaimTemplates is not a list");
    let template = templates
        .iter()
        .find(|t| t.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        .unwrap_or_else(|| panic!("{DATA_DIR} mounts volume {name}, which is no volumeClaimTemplate"));
    let modes: Vec<&str> = template
        .pointer("/spec/accessModes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(modes, ["ReadWriteOnce"], "the data claim must be ReadWriteOnce: one node per volume");
    assert!(
        template.pointer("/spec/resources/requests/storage").is_some_and(Value::is_string),
        "the data claim template must request storage"
    );
    let shadowed = sts
        .value
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .is_some_and(|vs| vs.iter().any(|v| v["name"] == name));
    assert!(!shadowed, "a pod volume also named {name} would replace the claim");
}

#[test]
fn certificates_are_mounted_as_whole_secret_directories() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let container = node_container(sts);
    let volumes = sts
        .value
        .pointer("/spec/template/spec/volumes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mounts = container["volumeMounts"].as_array().cloned().unwrap_or_default();
    let is_secret =
        |mount: &Value| volumes.iter().any(|v| v["name"] == mount["name"] && v.get("secret").is_some());
    for m in mounts.iter().filter(|&m| is_secret(m)) {
        assert!(
            m.get("subPath").is_none(),
            "Secret volume {} is mounted with subPath: the kubelet never updates such files, so renewed \
             certificates would not reach the node",
            m["name"]
        );
    }
    let cert = env(container, "ANNAL_CERTIFICATE_FILE")
        .expect("ANNAL_CERTIFICATE_FILE is not set: the default manifests use TLS (deploy/overlays/insecure does not)");
    let secret_mount_of = |path: &str, what: &str| -> String {
        let dir = mounts
            .iter()
            .filter(|&m| is_secret(m))
            .filter_map(|m| m["mountPath"].as_str())
            .find(|mp| path == *mp || Path::new(path).parent() == Some(Path::new(mp)))
            .unwrap_or_else(|| panic!("{what} {path} is not in a mounted Secret directory"));
        dir.to_string()
    };
    let cert_dir = secret_mount_of(&cert, "ANNAL_CERTIFICATE_FILE");
    if let Some(key) = env(container, "ANNAL_CERTIFICATE_PRIVATE_KEY_FILE") {
        secret_mount_of(&key, "ANNAL_CERTIFICATE_PRIVATE_KEY_FILE");
    }
    let roots = env(container, "ANNAL_TRUSTED_ROOT_CERTIFICATES_PATH")
        .expect("ANNAL_TRUSTED_ROOT_CERTIFICATES_PATH is not set (the image has no CA bundle)");
    let roots_dir = secret_mount_of(&roots, "ANNAL_TRUSTED_ROOT_CERTIFICATES_PATH");
    assert_eq!(roots_dir, roots, "the trusted roots path must be the mount point of a Secret directory");
    assert_ne!(
        roots_dir, cert_dir,
        "the trusted roots directory must not hold the node's certificate: every certificate file there \
         must be a self-signed root"
    );
}

#[test]
fn node_pods_get_no_service_variables() {
    let docs = manifests();
    let sts = statefulset(&docs);
    assert_eq!(
        sts.value.pointer("/spec/template/spec/enableServiceLinks").and_then(Value::as_bool),
        Some(false),
        "enableServiceLinks must be false: Kubernetes would set ANNAL_CLIENT_SERVICE_HOST and the like \
         for the Service annal-client, and the node refuses unknown ANNAL_ variables"
    );
}

#[test]
fn client_service_sends_to_ready_nodes_only() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let governing = at(sts, "/spec/serviceName").as_str().expect("serviceName is not a string");
    let pod_labels = at(sts, "/spec/template/metadata/labels");
    let clients: Vec<&Doc> = docs
        .iter()
        .filter(|d| d.kind() == "Service" && d.name() != governing)
        .filter(|d| d.value.pointer("/spec/selector").is_some_and(|s| labels_match(s, pod_labels)))
        .collect();
    assert!(!clients.is_empty(), "no Service for clients selects the StatefulSet's pods");
    for client in clients {
        assert_ne!(
            client.value.pointer("/spec/clusterIP").and_then(Value::as_str),
            Some("None"),
            "Service {} for clients should have a virtual IP",
            client.name()
        );
        assert_ne!(
            client.value.pointer("/spec/publishNotReadyAddresses").and_then(Value::as_bool),
            Some(true),
            "Service {} must send clients to ready nodes only",
            client.name()
        );
        let ports = at(client, "/spec/ports").as_array().expect("ports is not a list");
        assert!(
            ports.iter().any(|p| p["port"].as_i64() == Some(HTTP_PORT)
                && resolve_port(node_container(sts), p.get("targetPort").unwrap_or(&p["port"]))
                    == Some(HTTP_PORT)),
            "Service {} must serve port {HTTP_PORT} from the node's HTTP port",
            client.name()
        );
    }
}

#[test]
fn disruption_budget_covers_the_statefulset_pods() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let pod_labels = at(sts, "/spec/template/metadata/labels");
    let pdb = the(&docs, "PodDisruptionBudget", None);
    assert!(
        labels_match(at(pdb, "/spec/selector/matchLabels"), pod_labels),
        "PodDisruptionBudget {}'s selector {} does not select the StatefulSet's pods {pod_labels}",
        pdb.name(),
        at(pdb, "/spec/selector/matchLabels")
    );
    assert_eq!(
        pdb.value.pointer("/spec/maxUnavailable").and_then(Value::as_i64),
        Some(1),
        "the PodDisruptionBudget must allow one node down at a time (a three-node cluster keeps its quorum)"
    );
}

#[test]
fn scavenge_job_walks_the_statefulset_pods() {
    let docs = manifests();
    let sts = statefulset(&docs);
    let cron = the(&docs, "CronJob", None);
    assert_eq!(
        cron.value.pointer("/spec/concurrencyPolicy").and_then(Value::as_str),
        Some("Forbid"),
        "two scavenge jobs must never run at once"
    );
    let pod = at(cron, "/spec/jobTemplate/spec/template/spec");
    let container =
        pod["containers"].as_array().and_then(|c| c.first()).expect("the CronJob has no container");
    let expect = [
        ("STATEFULSET", sts.name().to_string()),
        ("SERVICE", at(sts, "/spec/serviceName").as_str().unwrap_or_default().to_string()),
        ("REPLICAS", at(sts, "/spec/replicas").to_string()),
        ("PORT", HTTP_PORT.to_string()),
    ];
    for (name, want) in expect {
        assert_eq!(
            env(container, name).as_deref(),
            Some(want.as_str()),
            "the scavenge CronJob's {name} must match the StatefulSet"
        );
    }
    let script = container["command"].as_array().and_then(|c| c.last()).and_then(Value::as_str).unwrap_or("");
    for piece in ["/admin/scavenge", "/admin/scavenge/current", "syncOnly=true", "/health/ready"] {
        assert!(script.contains(piece), "the scavenge CronJob's script does not use {piece}");
    }
}

#[test]
fn every_annal_variable_is_an_option() {
    let known: BTreeSet<String> = annal::config::OPTIONS.iter().map(annal::config::env_var).collect();
    assert!(known.contains("ANNAL_DB"), "annal::config::env_var does not give ANNAL_DB for --db");
    let docs: Vec<Doc> = manifests().into_iter().chain(overlay_documents()).collect();
    let mut named: Vec<(String, String)> = Vec::new();
    for doc in &docs {
        for pod in pod_specs(&doc.value) {
            for container in containers_of(pod) {
                for e in container["env"].as_array().into_iter().flatten() {
                    if let Some(name) = e["name"].as_str().filter(|n| n.starts_with("ANNAL_")) {
                        named.push((doc.file.clone(), name.to_string()));
                    }
                }
            }
        }
    }
    for args in instructions(&containerfile(), "ENV") {
        let first = args.split_whitespace().next().unwrap_or("");
        let names: Vec<&str> = if first.contains('=') {
            args.split_whitespace().filter_map(|kv| kv.split_once('=').map(|(k, _)| k)).collect()
        } else {
            vec![first]
        };
        for name in names.into_iter().filter(|n| n.starts_with("ANNAL_")) {
            named.push(("deploy/Containerfile".into(), name.to_string()));
        }
    }
    assert!(
        named.len() >= 5,
        "only {} ANNAL_ variables found in deploy/: the test would check nothing",
        named.len()
    );
    let unknown: Vec<String> =
        named.iter().filter(|(_, n)| !known.contains(n)).map(|(f, n)| format!("{n} ({f})")).collect();
    assert!(
        unknown.is_empty(),
        "the node refuses unknown ANNAL_ variables at start, and these are no option's: {unknown:?}"
    );
}

#[test]
fn environment_references_are_defined_before_use() {
    for doc in manifests() {
        for pod in pod_specs(&doc.value) {
            for container in containers_of(pod) {
                let mut defined: BTreeSet<&str> = BTreeSet::new();
                for e in container["env"].as_array().into_iter().flatten() {
                    let name = e["name"].as_str().unwrap_or("");
                    let value = e["value"].as_str().unwrap_or("");
                    let mut rest = value;
                    while let Some(start) = rest.find("$(") {
                        let after = &rest[start + 2..];
                        let Some(end) = after.find(')') else { break };
                        let var = &after[..end];
                        assert!(
                            defined.contains(var),
                            "{}: {name} refers to $({var}), which is not defined above it in the container's \
                             env (Kubernetes would leave the text as it is)",
                            doc.file
                        );
                        rest = &after[end + 1..];
                    }
                    defined.insert(name);
                }
            }
        }
    }
}

#[test]
fn containerfile_runs_annal_as_1001_with_a_healthcheck() {
    let all = containerfile();
    let from = instructions(&all, "FROM");
    assert_eq!(from, ["scratch"], "the image must be FROM scratch (nothing to pull); found FROM {from:?}");
    let user = instructions(&all, "USER");
    let last_user = user.last().expect("deploy/Containerfile has no USER: the node would run as root");
    let (uid, gid) = last_user.split_once(':').unwrap_or((last_user.as_str(), ""));
    assert_eq!(uid, UID.to_string(), "USER must be the numeric {UID} (scratch has no /etc/passwd)");
    assert!(gid.is_empty() || gid == UID.to_string(), "USER's group must be {UID}, got {gid}");
    let health = instructions(&all, "HEALTHCHECK");
    let check = health.last().expect("deploy/Containerfile has no HEALTHCHECK");
    let cmd =
        check.split_once("CMD").map(|(_, c)| c).unwrap_or_else(|| panic!("HEALTHCHECK {check} has no CMD"));
    assert!(
        cmd.contains("/annal") && cmd.contains("healthcheck"),
        "HEALTHCHECK must run `/annal healthcheck` (scratch has no curl), runs {cmd}"
    );
    let entrypoint = instructions(&all, "ENTRYPOINT");
    assert_eq!(
        entrypoint.last().map(String::as_str),
        Some(r#"["/annal"]"#),
        "ENTRYPOINT must be [\"/annal\"]"
    );
    let exposed: BTreeSet<String> = instructions(&all, "EXPOSE")
        .iter()
        .flat_map(|a| {
            a.split_whitespace().map(|p| p.trim_end_matches("/tcp").to_string()).collect::<Vec<_>>()
        })
        .collect();
    for port in ["2113", "1112"] {
        assert!(exposed.contains(port), "EXPOSE must include {port} (exposes {exposed:?})");
    }
    assert!(
        instructions(&all, "VOLUME").iter().any(|v| v.contains(DATA_DIR)),
        "VOLUME must declare {DATA_DIR}"
    );
    assert!(
        instructions(&all, "COPY")
            .iter()
            .any(|c| c.contains(&format!("--chown={UID}:{UID}")) && c.trim_end().ends_with(DATA_DIR)),
        "{DATA_DIR} must be copied in owned by {UID}:{UID} (scratch has no shell to chown it)"
    );
}
