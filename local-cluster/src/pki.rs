//! The local cluster's certificates, made fresh for each cluster: a CA, the kube-apiserver's
//! serving certificate, an admin client certificate (group `system:masters`), the service account
//! signing key, and, as kubeadm makes them, a front-proxy CA with the client certificate the API
//! server presents to aggregated API servers (which trust its `X-Remote-User` headers by it).
//! ECDSA P-256 throughout; every component accepts it.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The files [`generate`] writes, by role.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub apiserver_cert: PathBuf,
    pub apiserver_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_pub: PathBuf,
    pub front_proxy_ca_cert: PathBuf,
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
}

impl Pki {
    pub fn in_dir(dir: &Path) -> Self {
        Pki {
            ca_cert: dir.join("ca.crt"),
            apiserver_cert: dir.join("apiserver.crt"),
            apiserver_key: dir.join("apiserver.key"),
            admin_cert: dir.join("admin.crt"),
            admin_key: dir.join("admin.key"),
            service_account_key: dir.join("sa.key"),
            service_account_pub: dir.join("sa.pub"),
            front_proxy_ca_cert: dir.join("front-proxy-ca.crt"),
            front_proxy_client_cert: dir.join("front-proxy-client.crt"),
            front_proxy_client_key: dir.join("front-proxy-client.key"),
        }
    }
}

/// The common name of the API server's front-proxy client certificate (kubeadm's).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The client certificate and key of node `name`'s kubelet in `dir` (see [`generate`]).
pub fn node_client(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    (dir.join(format!("node-{name}.crt")), dir.join(format!("node-{name}.key")))
}

/// kube-proxy's client certificate and key in `dir` (user `system:kube-proxy`, which the
/// `system:node-proxier` role is bound to), written by [`generate`] when it has nodes.
pub fn kube_proxy_client(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("kube-proxy.crt"), dir.join("kube-proxy.key"))
}

/// Writes a fresh PKI into `dir`. `service_ip` is the first address of the service range, which
/// in-cluster clients reach the API server at; the API server's certificate also names `extra_ips`
/// (the address it advertises to real nodes). Each of `nodes` gets a kubelet client certificate
/// (`system:node:<name>` in `system:nodes`, what the Node authorizer expects), see [`node_client`].
pub fn generate(dir: &Path, service_ip: Ipv4Addr, extra_ips: &[Ipv4Addr], nodes: &[String]) -> Result<Pki, PkiError> {
    let pki = Pki::in_dir(dir);
    let write = |path: &Path, contents: String| {
        fs::write(path, contents).map_err(|source| PkiError::Write { path: path.to_path_buf(), source })
    };
    fs::create_dir_all(dir).map_err(|source| PkiError::Write { path: dir.to_path_buf(), source })?;

    let ca = self_signed_ca("cloud-provider-harness-ca")?;
    write(&pki.ca_cert, ca.pem())?;

    let mut serving = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ])?;
    serving.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(service_ip)));
    for ip in extra_ips {
        serving.subject_alt_names.push(SanType::IpAddress(IpAddr::V4(*ip)));
    }
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate()?;
    write(&pki.apiserver_cert, serving.signed_by(&serving_key, &ca)?.pem())?;
    write(&pki.apiserver_key, serving_key.serialize_pem())?;

    let mut admin = CertificateParams::new(Vec::<String>::new())?;
    admin.distinguished_name.push(DnType::CommonName, "kubernetes-admin");
    admin.distinguished_name.push(DnType::OrganizationName, "system:masters");
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_key = KeyPair::generate()?;
    write(&pki.admin_cert, admin.signed_by(&admin_key, &ca)?.pem())?;
    write(&pki.admin_key, admin_key.serialize_pem())?;

    let proxy = (!nodes.is_empty()).then(|| ("system:kube-proxy".to_string(), None, kube_proxy_client(dir)));
    let kubelets =
        nodes.iter().map(|name| (format!("system:node:{name}"), Some("system:nodes"), node_client(dir, name)));
    for (user, group, (cert_path, key_path)) in kubelets.chain(proxy) {
        let mut client = CertificateParams::new(Vec::<String>::new())?;
        client.distinguished_name.push(DnType::CommonName, user);
        if let Some(group) = group {
            client.distinguished_name.push(DnType::OrganizationName, group);
        }
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate()?;
        write(&cert_path, client.signed_by(&key, &ca)?.pem())?;
        write(&key_path, key.serialize_pem())?;
    }

    // The front proxy's own CA, as kubeadm's: a client certificate of the cluster CA must not be
    // able to pass as the proxy and assert any user in headers.
    let front_ca = self_signed_ca("cloud-provider-harness-front-proxy-ca")?;
    write(&pki.front_proxy_ca_cert, front_ca.pem())?;
    let mut front_client = CertificateParams::new(Vec::<String>::new())?;
    front_client.distinguished_name.push(DnType::CommonName, FRONT_PROXY_CLIENT);
    front_client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let front_key = KeyPair::generate()?;
    write(&pki.front_proxy_client_cert, front_client.signed_by(&front_key, &front_ca)?.pem())?;
    write(&pki.front_proxy_client_key, front_key.serialize_pem())?;

    let service_account = KeyPair::generate()?;
    write(&pki.service_account_key, service_account.serialize_pem())?;
    write(&pki.service_account_pub, service_account.public_key_pem())?;
    Ok(pki)
}

/// A fresh self-signed CA named `name`.
fn self_signed_ca(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, PkiError> {
    Ok(CertifiedIssuer::self_signed(ca_params(name)?, KeyPair::generate()?)?)
}

fn ca_params(name: &str) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// Writes a fresh self-signed CA named `name`, its certificate to `cert` and its key (PKCS#8)
/// to `key`: for a service of the cluster's cloud that signs certificates itself.
pub fn write_ca(name: &str, cert: &Path, key: &Path) -> Result<(), PkiError> {
    let key_pair = KeyPair::generate()?;
    let key_pem = key_pair.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params(name)?, key_pair)?;
    for (path, contents) in [(cert, ca.pem()), (key, key_pem)] {
        fs::write(path, contents).map_err(|source| PkiError::Write { path: path.to_path_buf(), source })?;
    }
    Ok(())
}
