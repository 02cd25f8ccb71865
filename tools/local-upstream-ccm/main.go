// Command local-upstream-ccm is upstream's cloud-controller-manager (k8s.io/cloud-provider's
// app.NewCloudControllerManagerCommand with its default controllers: cloud-node,
// cloud-node-lifecycle, service and route) with one cloud plugged in: `local`, the harness's local
// simulated cloud, spoken to over its HTTP API (provider.go). It takes upstream's flags, so the
// harness runs it with the same arguments as the reference CCM (`--cloud-provider=local
// --cloud-config=FILE ...`). `harness toolchain install` builds it once per pinned Kubernetes
// release, against k8s.io/cloud-provider of that release (v1.37/go.mod, v1.36/go.mod).
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"  // client-go's request metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"   // kubernetes_build_info
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // workqueue_* per controller queue
	"k8s.io/klog/v2"
)

func main() {
	cloudprovider.RegisterCloudProvider(ProviderName, newLocalCloud)

	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("local-upstream-ccm: cannot build the default options: %v", err)
	}
	command := app.NewCloudControllerManagerCommand(opts, initCloud, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(command))
}

// initCloud builds the provider named by --cloud-provider from --cloud-config.
func initCloud(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("local-upstream-ccm: cloud provider %q could not be initialised: %v", shared.Name, err)
	}
	if cloud == nil {
		klog.Fatalf("local-upstream-ccm: unknown --cloud-provider %q; this CCM knows only %q", shared.Name, ProviderName)
	}
	return cloud
}
