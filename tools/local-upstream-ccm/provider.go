package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	servicehelpers "k8s.io/cloud-provider/service/helpers"
	"sigs.k8s.io/yaml"
)

const (
	// ProviderName is what --cloud-provider names; node provider IDs start with it.
	ProviderName = "local"
	// providerIDPrefix is followed by the cloud's instance ID.
	providerIDPrefix = ProviderName + "://"
)

// cloudConfig is the --cloud-config file the harness writes: the local cloud's state dir, whose
// `address` file holds where the cloud listens. `url` may name the cloud directly instead.
type cloudConfig struct {
	StateDir string `json:"stateDir"`
	URL      string `json:"url"`
}

// localCloud is cloudprovider.Interface over the local cloud's HTTP API: InstancesV2,
// LoadBalancer and Routes; no Instances, Zones or Clusters (InstancesV2 gives zones).
type localCloud struct {
	api *client
}

var (
	_ cloudprovider.Interface    = (*localCloud)(nil)
	_ cloudprovider.InstancesV2  = (*localCloud)(nil)
	_ cloudprovider.LoadBalancer = (*localCloud)(nil)
	_ cloudprovider.Routes       = (*localCloud)(nil)
)

// newLocalCloud reads the cloud config; the cloud's address is looked up on first use, so the CCM
// may start before the cloud does.
func newLocalCloud(configReader io.Reader) (cloudprovider.Interface, error) {
	if configReader == nil {
		return nil, errors.New("--cloud-config is required: a file with `stateDir: <the local cloud's state dir>` or `url: http://127.0.0.1:PORT`")
	}
	text, err := io.ReadAll(configReader)
	if err != nil {
		return nil, fmt.Errorf("reading --cloud-config: %w", err)
	}
	var cfg cloudConfig
	if err := yaml.UnmarshalStrict(text, &cfg); err != nil {
		return nil, fmt.Errorf("--cloud-config: %w (expected `stateDir: DIR` or `url: http://127.0.0.1:PORT`)", err)
	}
	if (cfg.StateDir == "") == (cfg.URL == "") {
		return nil, errors.New("--cloud-config must set exactly one of stateDir and url")
	}
	resolve := func() (string, error) { return cfg.URL, nil }
	if cfg.StateDir != "" {
		resolve = func() (string, error) { return urlFromStateDir(cfg.StateDir) }
	}
	return &localCloud{api: newClient(resolve)}, nil
}

// urlFromStateDir reads `<stateDir>/address` (`127.0.0.1:PORT`), written by a serving cloud.
func urlFromStateDir(dir string) (string, error) {
	path := filepath.Join(dir, "address")
	text, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s (is a local cloud serving that state dir?): %w", path, err)
	}
	address := strings.TrimSpace(string(text))
	if address == "" || strings.ContainsAny(address, "/ ") {
		return "", fmt.Errorf("%s does not hold an address like 127.0.0.1:8080: %q", path, address)
	}
	return "http://" + address, nil
}

func (c *localCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *localCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c, true }
func (c *localCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *localCloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return c, true }
func (c *localCloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (c *localCloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (c *localCloud) Routes() (cloudprovider.Routes, bool)                              { return c, true }
func (c *localCloud) ProviderName() string                                              { return ProviderName }
func (c *localCloud) HasClusterID() bool                                                { return true }

// The local cloud's JSON (ccm/src/local_cloud/api.rs).

type address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

type instance struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone"`
	Region       string    `json:"region"`
	Addresses    []address `json:"addresses"`
	State        string    `json:"state"`
}

type lbPort struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	NodePort int32  `json:"node_port"`
}

type lbSpec struct {
	Service             string   `json:"service"`
	Ports               []lbPort `json:"ports"`
	Backends            []string `json:"backends"`
	SourceRanges        []string `json:"source_ranges"`
	HealthCheckNodePort int32    `json:"health_check_node_port"`
	SessionAffinity     string   `json:"session_affinity"`
}

type loadBalancer struct {
	IngressIPs []string `json:"ingress_ips"`
}

type updateBackends struct {
	Backends []string `json:"backends"`
}

type createRoute struct {
	NameHint        string `json:"name_hint"`
	TargetNode      string `json:"target_node"`
	DestinationCIDR string `json:"destination_cidr"`
}

type route struct {
	Name            string `json:"name"`
	TargetNode      string `json:"target_node"`
	DestinationCIDR string `json:"destination_cidr"`
	Blackhole       bool   `json:"blackhole"`
}

// findInstance is the node's instance, by provider ID when the node has one, else by node name;
// nil when the cloud has none.
func (c *localCloud) findInstance(ctx context.Context, operation string, node *v1.Node) (*instance, error) {
	var path string
	if id := node.Spec.ProviderID; id != "" {
		instanceID, ok := strings.CutPrefix(id, providerIDPrefix)
		if !ok || instanceID == "" || strings.Contains(instanceID, "/") {
			return nil, fmt.Errorf("%s: providerID %q is not a local one (%s<instance-id>)", operation, id, providerIDPrefix)
		}
		path = "/v1/instances/by-id/" + escape(instanceID)
	} else if node.Name != "" {
		path = "/v1/instances/" + escape(node.Name)
	} else {
		return nil, nil
	}
	var found instance
	ok, err := c.api.do(ctx, operation, "GET", path, nil, &found)
	if err != nil || !ok {
		return nil, err
	}
	return &found, nil
}

func (c *localCloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	found, err := c.findInstance(ctx, "instance_exists", node)
	if err != nil {
		return false, err
	}
	return found != nil && found.State != "terminated", nil
}

func (c *localCloud) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	found, err := c.findInstance(ctx, "instance_shutdown", node)
	if err != nil {
		return false, err
	}
	if found == nil {
		return false, cloudprovider.InstanceNotFound
	}
	return found.State == "shutdown", nil
}

func (c *localCloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	found, err := c.findInstance(ctx, "instance_metadata", node)
	if err != nil {
		return nil, err
	}
	if found == nil || found.State == "terminated" {
		return nil, cloudprovider.InstanceNotFound
	}
	addresses := make([]v1.NodeAddress, 0, len(found.Addresses))
	for _, a := range found.Addresses {
		addresses = append(addresses, v1.NodeAddress{Type: v1.NodeAddressType(a.Type), Address: a.Address})
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    providerIDPrefix + found.ID,
		InstanceType:  found.InstanceType,
		NodeAddresses: addresses,
		Zone:          found.Zone,
		Region:        found.Region,
	}, nil
}

func (c *localCloud) lbPath(clusterName string, service *v1.Service) string {
	return "/v1/loadbalancers/" + escape(clusterName) + "/" + escape(cloudprovider.DefaultLoadBalancerName(service))
}

func (c *localCloud) GetLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	var found loadBalancer
	ok, err := c.api.do(ctx, "get_load_balancer", "GET", c.lbPath(clusterName, service), nil, &found)
	if err != nil || !ok {
		return nil, false, err
	}
	return found.status(), true, nil
}

func (c *localCloud) GetLoadBalancerName(_ context.Context, _ string, service *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(service)
}

func (c *localCloud) EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	ranges, err := servicehelpers.GetLoadBalancerSourceRanges(service)
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", service.Namespace, service.Name, err)
	}
	sourceRanges := ranges.StringSlice()
	sort.Strings(sourceRanges)
	spec := lbSpec{
		Service:         service.Namespace + "/" + service.Name,
		Backends:        nodeNames(nodes),
		SourceRanges:    sourceRanges,
		SessionAffinity: "None",
	}
	// Backends are health-checked where only nodes with an endpoint can serve (GCE's provider does
	// the same with this helper).
	if path, port := servicehelpers.GetServiceHealthCheckPathPort(service); path != "" {
		spec.HealthCheckNodePort = port
	}
	if service.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		spec.SessionAffinity = "ClientIP"
	}
	for _, p := range service.Spec.Ports {
		spec.Ports = append(spec.Ports, lbPort{Name: p.Name, Protocol: string(p.Protocol), Port: p.Port, NodePort: p.NodePort})
	}
	var ensured loadBalancer
	ok, err := c.api.do(ctx, "ensure_load_balancer", "PUT", c.lbPath(clusterName, service), spec, &ensured)
	if err == nil && !ok {
		err = fmt.Errorf("ensure_load_balancer: PUT %s: not found", c.lbPath(clusterName, service))
	}
	if err != nil {
		return nil, err
	}
	return ensured.status(), nil
}

func (c *localCloud) UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error {
	path := c.lbPath(clusterName, service)
	ok, err := c.api.do(ctx, "update_load_balancer", "PATCH", path, updateBackends{Backends: nodeNames(nodes)}, nil)
	if err == nil && !ok {
		err = fmt.Errorf("update_load_balancer: PATCH %s: the load balancer does not exist", path)
	}
	return err
}

func (c *localCloud) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *v1.Service) error {
	// A 404 means it is gone already: done.
	_, err := c.api.do(ctx, "ensure_load_balancer_deleted", "DELETE", c.lbPath(clusterName, service), nil, nil)
	return err
}

func (lb *loadBalancer) status() *v1.LoadBalancerStatus {
	status := &v1.LoadBalancerStatus{}
	for _, ip := range lb.IngressIPs {
		status.Ingress = append(status.Ingress, v1.LoadBalancerIngress{IP: ip})
	}
	return status
}

func nodeNames(nodes []*v1.Node) []string {
	names := make([]string, 0, len(nodes))
	for _, node := range nodes {
		names = append(names, node.Name)
	}
	return names
}

func (c *localCloud) routes(ctx context.Context, operation, clusterName string) ([]route, error) {
	var routes []route
	ok, err := c.api.do(ctx, operation, "GET", "/v1/routes/"+escape(clusterName), nil, &routes)
	if err == nil && !ok {
		err = fmt.Errorf("%s: GET /v1/routes/%s: not found", operation, clusterName)
	}
	return routes, err
}

func (c *localCloud) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	routes, err := c.routes(ctx, "list_routes", clusterName)
	if err != nil {
		return nil, err
	}
	listed := make([]*cloudprovider.Route, 0, len(routes))
	for _, r := range routes {
		listed = append(listed, &cloudprovider.Route{
			Name:            r.Name,
			TargetNode:      types.NodeName(r.TargetNode),
			DestinationCIDR: r.DestinationCIDR,
			Blackhole:       r.Blackhole,
		})
	}
	return listed, nil
}

func (c *localCloud) CreateRoute(ctx context.Context, clusterName string, nameHint string, r *cloudprovider.Route) error {
	body := createRoute{NameHint: nameHint, TargetNode: string(r.TargetNode), DestinationCIDR: r.DestinationCIDR}
	ok, err := c.api.do(ctx, "create_route", "POST", "/v1/routes/"+escape(clusterName), body, nil)
	if err == nil && !ok {
		err = fmt.Errorf("create_route: POST /v1/routes/%s: not found", clusterName)
	}
	return err
}

func (c *localCloud) DeleteRoute(ctx context.Context, clusterName string, r *cloudprovider.Route) error {
	name := r.Name
	if name == "" {
		routes, err := c.routes(ctx, "delete_route", clusterName)
		if err != nil {
			return err
		}
		for _, known := range routes {
			if known.DestinationCIDR == r.DestinationCIDR {
				name = known.Name
			}
		}
		if name == "" {
			return nil
		}
	}
	_, err := c.api.do(ctx, "delete_route", "DELETE", "/v1/routes/"+escape(clusterName)+"/"+escape(name), nil, nil)
	return err
}
