//! `PRODUCT.yaml`: what is certified, as `cncf/k8s-conformance`'s instructions define it, and the
//! checks its fields get (the same for the `certification:` block of `providers.yaml` and for a
//! submission's file).

use serde::Serialize;

/// The values `type` may take.
pub const PRODUCT_TYPES: [&str; 3] = ["distribution", "hosted platform", "installer"];
/// The fields that must be there and not be empty, in the order the checks report them.
pub const REQUIRED_FIELDS: [&str; 8] =
    ["vendor", "name", "version", "type", "description", "website_url", "documentation_url", "contact_email_address"];
/// The fields that must parse as absolute URLs when present.
pub const URL_FIELDS: [&str; 4] = ["website_url", "repo_url", "documentation_url", "product_logo_url"];
/// The URL fields whose page must answer with `text/html`.
pub const HTML_FIELDS: [&str; 3] = ["website_url", "repo_url", "documentation_url"];
/// The content types `product_logo_url` may answer with (SVG, or AI/EPS as PostScript).
pub const LOGO_CONTENT_TYPES: [&str; 2] = ["image/svg", "application/postscript"];

/// One `PRODUCT.yaml`, every value a string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Product {
    pub vendor: String,
    pub name: String,
    /// The product's own version, not Kubernetes'.
    pub version: String,
    pub website_url: String,
    /// Required for open-source products.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo_url: Option<String>,
    pub documentation_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product_logo_url: Option<String>,
    /// One of [`PRODUCT_TYPES`].
    #[serde(rename = "type")]
    pub product_type: String,
    /// One sentence.
    pub description: String,
    pub contact_email_address: String,
}

impl Product {
    /// The file's text. serde_yaml_ng quotes every string that would otherwise read back as
    /// something else (`1.0`, `true`), so every value stays a string.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("a struct of strings serialises")
    }

    /// The values of the fields, by their names in the file.
    pub fn fields(&self) -> Vec<(&'static str, Option<&str>)> {
        vec![
            ("vendor", Some(&self.vendor)),
            ("name", Some(&self.name)),
            ("version", Some(&self.version)),
            ("website_url", Some(&self.website_url)),
            ("repo_url", self.repo_url.as_deref()),
            ("documentation_url", Some(&self.documentation_url)),
            ("product_logo_url", self.product_logo_url.as_deref()),
            ("type", Some(&self.product_type)),
            ("description", Some(&self.description)),
            ("contact_email_address", Some(&self.contact_email_address)),
        ]
    }

    /// Every problem of the fields' values, as `(field, reason)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        for (field, value) in self.fields() {
            let Some(value) = value else { continue };
            if let Err(reason) = check_field(field, value) {
                problems.push((field, reason));
            }
        }
        problems
    }

    /// The submission's folder under `vX.Y/`: the name in lower case, each run of other
    /// characters than letters, digits, `.` and `_` a `-` (`Reference CCM` → `reference-ccm`).
    pub fn folder(&self) -> String {
        folder_name(&self.name)
    }
}

/// See [`Product::folder`].
pub fn folder_name(name: &str) -> String {
    let mut folder = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            folder.push(c.to_ascii_lowercase());
        } else if !folder.ends_with('-') {
            folder.push('-');
        }
    }
    folder.trim_matches('-').to_owned()
}

/// The check of one field's value: not empty, and a URL, an e-mail address or a product type
/// where the field is one.
pub fn check_field(field: &str, value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("is empty".into());
    }
    if URL_FIELDS.contains(&field) {
        check_url(value)?;
    }
    match field {
        "contact_email_address" => check_email(value),
        "type" => check_type(value),
        _ => Ok(()),
    }
}

/// An absolute `http`/`https` URL with a host. (The submission checks use Go's
/// `url.ParseRequestURI`, which also takes a bare absolute path such as `/docs`; no page can be
/// fetched from one, so it is refused here.)
pub fn check_url(value: &str) -> Result<(), String> {
    let url = url::Url::parse(value).map_err(|e| format!("`{value}` is not an absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{value}` is not an http(s) URL with a host"));
    }
    Ok(())
}

/// An RFC 5322 address, bare (`a@b.org`) or with a display name (`Team <a@b.org>`), as Go's
/// `net/mail.ParseAddress` takes.
pub fn check_email(value: &str) -> Result<(), String> {
    value
        .parse::<email_address::EmailAddress>()
        .map(drop)
        .map_err(|e| format!("`{value}` is not an e-mail address ({e})"))
}

/// Exactly one of [`PRODUCT_TYPES`].
pub fn check_type(value: &str) -> Result<(), String> {
    if PRODUCT_TYPES.contains(&value) {
        Ok(())
    } else {
        Err(format!("`{value}` is not one of: {}", PRODUCT_TYPES.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn product() -> Product {
        Product {
            vendor: "Example".into(),
            name: "Example Kubernetes".into(),
            version: "1.0".into(),
            website_url: "https://example.org/".into(),
            repo_url: Some("https://github.com/example/kube".into()),
            documentation_url: "https://example.org/docs".into(),
            product_logo_url: None,
            product_type: "distribution".into(),
            description: "A Kubernetes distribution.".into(),
            contact_email_address: "kube@example.org".into(),
        }
    }

    #[test]
    fn every_value_reads_back_as_a_string() {
        let text = product().to_yaml();
        let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        let map = value.as_mapping().unwrap();
        assert_eq!(map.len(), 9, "{text}");
        for (key, value) in map {
            assert!(value.is_string(), "{key:?}: {value:?} in\n{text}");
        }
        assert_eq!(map.get("version").and_then(|v| v.as_str()), Some("1.0"));
        assert!(!text.contains("product_logo_url"), "{text}");
    }

    #[test]
    fn a_good_product_has_no_problems() {
        assert_eq!(product().problems(), []);
    }

    #[test]
    fn bad_values_are_named_with_their_reason() {
        let mut bad = product();
        bad.product_type = "platform".into();
        bad.contact_email_address = "kube at example.org".into();
        bad.documentation_url = "docs/index.html".into();
        bad.vendor = " ".into();
        let problems = bad.problems();
        let fields: Vec<_> = problems.iter().map(|(field, _)| *field).collect();
        assert_eq!(fields, ["vendor", "documentation_url", "type", "contact_email_address"], "{problems:?}");
        assert!(problems[1].1.contains("not an absolute URL"), "{problems:?}");
        assert!(problems[2].1.contains("distribution, hosted platform, installer"), "{problems:?}");
    }

    #[test]
    fn urls_need_a_scheme_and_host() {
        assert!(check_url("https://example.org/docs").is_ok());
        assert!(check_url("/docs").is_err());
        assert!(check_url("mailto:kube@example.org").is_err());
        assert!(check_url("ftp://example.org/").is_err());
    }

    #[test]
    fn addresses_may_carry_a_display_name() {
        assert!(check_email("kube@example.org").is_ok());
        assert!(check_email("Kube Team <kube@example.org>").is_ok());
        assert!(check_email("kube@").is_err());
        assert!(check_email("example.org").is_err());
    }

    #[test]
    fn folders_are_lower_case_words_joined_by_dashes() {
        assert_eq!(folder_name("Reference CCM (local cloud)"), "reference-ccm-local-cloud");
        assert_eq!(folder_name("k3s"), "k3s");
        assert_eq!(folder_name("  Open_Shift 4.x "), "open_shift-4.x");
    }
}
