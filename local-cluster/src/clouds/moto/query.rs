//! A small client of the AWS query APIs the `aws` provider's cloud (moto) serves: EC2
//! (`Version=2016-11-15`) and Elastic Load Balancing (classic, `Version=2012-06-01`). A request is
//! a form POST of `Action=...&Version=...&<params>`; the answer is XML, read here into a small
//! element tree. Requests carry an `Authorization` header naming the region and the service in its
//! credential scope, as a SigV4 signature does: moto routes on it and never checks the signature.

use std::time::Duration;

use quick_xml::events::Event;

/// The services the client talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Ec2,
    Elb,
}

impl Service {
    /// The signing name, which moto routes on.
    fn signing_name(self) -> &'static str {
        match self {
            Service::Ec2 => "ec2",
            Service::Elb => "elasticloadbalancing",
        }
    }

    fn version(self) -> &'static str {
        match self {
            Service::Ec2 => "2016-11-15",
            Service::Elb => "2012-06-01",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{action} at {endpoint}: {source}; is the cloud (moto) still running?")]
    Http { action: String, endpoint: String, source: reqwest::Error },
    #[error("{action} at {endpoint} failed with HTTP {status}: {code}: {message}")]
    Api { action: String, endpoint: String, status: u16, code: String, message: String },
    #[error("{action} at {endpoint} answered XML that does not parse: {detail}")]
    Xml { action: String, endpoint: String, detail: String },
}

/// A client of one endpoint serving every service (moto's server mode).
#[derive(Debug, Clone)]
pub struct QueryClient {
    endpoint: String,
    region: String,
    http: reqwest::Client,
}

impl QueryClient {
    pub fn new(endpoint: &str, region: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .no_proxy()
            .build()
            .expect("a reqwest client without custom TLS builds");
        QueryClient { endpoint: endpoint.trim_end_matches('/').to_owned(), region: region.to_owned(), http }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Calls `action` of `service` with `params`; returns the answer's root element.
    pub async fn call(
        &self,
        service: Service,
        action: &str,
        params: &[(String, String)],
    ) -> Result<Element, QueryError> {
        let mut form: Vec<(&str, &str)> = vec![("Action", action), ("Version", service.version())];
        form.extend(params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential=harness/20260101/{}/{}/aws4_request, SignedHeaders=host, Signature=0",
            self.region,
            service.signing_name()
        );
        let http_err = |source| QueryError::Http { action: action.into(), endpoint: self.endpoint.clone(), source };
        let response = self
            .http
            .post(format!("{}/", self.endpoint))
            .header("Authorization", authorization)
            .form(&form)
            .send()
            .await
            .map_err(http_err)?;
        let status = response.status();
        let body = response.text().await.map_err(http_err)?;
        let root = Element::parse(&body).map_err(|detail| QueryError::Xml {
            action: action.into(),
            endpoint: self.endpoint.clone(),
            detail: format!("{detail}: {}", body.chars().take(300).collect::<String>()),
        })?;
        if !status.is_success() {
            let code = root.descendant("Code").map(|e| e.text.clone()).unwrap_or_default();
            let message = root.descendant("Message").map(|e| e.text.clone()).unwrap_or_else(|| body.clone());
            return Err(QueryError::Api {
                action: action.into(),
                endpoint: self.endpoint.clone(),
                status: status.as_u16(),
                code,
                message,
            });
        }
        Ok(root)
    }
}

/// `Prefix.1`, `Prefix.2`, ... for a list parameter.
pub fn list_params(prefix: &str, values: &[&str]) -> Vec<(String, String)> {
    values.iter().enumerate().map(|(i, v)| (format!("{prefix}.{}", i + 1), (*v).to_owned())).collect()
}

/// `Prefix.N.Key` / `Prefix.N.Value` pairs of tags (EC2's `TagSpecification.1.Tag`, `Tag`).
pub fn tag_params(prefix: &str, tags: &[(&str, &str)]) -> Vec<(String, String)> {
    tags.iter()
        .enumerate()
        .flat_map(|(i, (k, v))| {
            [
                (format!("{prefix}.{}.Key", i + 1), (*k).to_owned()),
                (format!("{prefix}.{}.Value", i + 1), (*v).to_owned()),
            ]
        })
        .collect()
}

/// An XML element: its local name, its text, its child elements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// Parses a document; returns its root element.
    pub fn parse(xml: &str) -> Result<Element, String> {
        let mut reader = quick_xml::Reader::from_str(xml);
        let mut stack: Vec<Element> = vec![Element::default()];
        loop {
            match reader.read_event().map_err(|e| e.to_string())? {
                Event::Start(start) => {
                    let name = start.local_name().as_ref().to_owned();
                    stack.push(Element { name, ..Element::default() });
                }
                Event::Empty(start) => {
                    let name = start.local_name().as_ref().to_owned();
                    stack
                        .last_mut()
                        .expect("the document element")
                        .children
                        .push(Element { name, ..Element::default() });
                }
                Event::Text(text) => {
                    let text = text.into_inner().into_owned();
                    stack.last_mut().expect("the document element").text.push_str(text.trim());
                }
                Event::GeneralRef(reference) => {
                    let entity = format!("&{};", reference.into_inner());
                    let text = quick_xml::escape::unescape(&entity).map_err(|e| e.to_string())?;
                    stack.last_mut().expect("the document element").text.push_str(&text);
                }
                Event::CData(data) => {
                    let text = data.into_inner().to_string();
                    stack.last_mut().expect("the document element").text.push_str(text.trim());
                }
                Event::End(_) => {
                    let done = stack.pop().expect("an open element");
                    stack.last_mut().ok_or("unbalanced end tag")?.children.push(done);
                }
                Event::Eof => break,
                _ => {}
            }
        }
        let document = stack.pop().filter(|_| stack.is_empty()).ok_or("unclosed elements")?;
        document.children.into_iter().next().ok_or_else(|| "no root element".to_owned())
    }

    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The text of the first child named `name`, or "".
    pub fn text_of(&self, name: &str) -> &str {
        self.child(name).map_or("", |c| c.text.as_str())
    }

    /// The element at `path` (child names separated by `/`).
    pub fn at(&self, path: &str) -> Option<&Element> {
        path.split('/').try_fold(self, |element, name| element.child(name))
    }

    /// The first element named `name` anywhere below this one, depth first.
    pub fn descendant(&self, name: &str) -> Option<&Element> {
        self.children.iter().find_map(|c| if c.name == name { Some(c) } else { c.descendant(name) })
    }

    /// The `item`/`member` children of the element at `path`: AWS's lists.
    pub fn items(&self, path: &str) -> Vec<&Element> {
        self.at(path)
            .map(|list| list.children.iter().filter(|c| c.name == "item" || c.name == "member").collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_ec2_answer_and_its_lists() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <reservationSet><item><instancesSet>
    <item><instanceId>i-1</instanceId><privateDnsName>ip-127-1-0-10.ec2.internal</privateDnsName>
      <instanceState><name>running</name></instanceState><tagSet/></item>
    <item><instanceId>i-2</instanceId><privateDnsName>a&amp;b</privateDnsName></item>
  </instancesSet></item></reservationSet>
</DescribeInstancesResponse>"#;
        let root = Element::parse(xml).unwrap();
        assert_eq!(root.name, "DescribeInstancesResponse");
        let reservations = root.items("reservationSet");
        let instances = reservations[0].items("instancesSet");
        assert_eq!(instances.len(), 2);
        assert_eq!(instances[0].text_of("instanceId"), "i-1");
        assert_eq!(instances[0].at("instanceState/name").unwrap().text, "running");
        assert_eq!(instances[1].text_of("privateDnsName"), "a&b");
        assert!(Element::parse("<a><b></a>").is_err());
    }

    #[test]
    fn list_and_tag_parameters_are_numbered_from_one() {
        assert_eq!(list_params("InstanceId", &["i-1", "i-2"])[1], ("InstanceId.2".into(), "i-2".into()));
        let tags = tag_params("Tag", &[("k", "v")]);
        assert_eq!(tags, [("Tag.1.Key".into(), "k".into()), ("Tag.1.Value".into(), "v".into())]);
    }
}
