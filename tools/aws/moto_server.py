# moto's server (`moto_server`), with one gap of moto's filled in: the one field of AWS's answers
# that the AWS CCM needs and moto leaves out. `harness toolchain install` copies this file next to
# moto's virtualenv, whose python runs it; the local deployer starts it with moto_server's arguments.
#
# A classic ELB always has a health check: AWS gives a new load balancer a default one
# (TCP on the first listener's instance port, interval 30 s, timeout 5 s, unhealthy 2, healthy 10)
# and DescribeLoadBalancers always returns `HealthCheck`. moto leaves it out until
# ConfigureHealthCheck is called, and cloud-provider-aws's EnsureLoadBalancer dereferences it
# (ensureLoadBalancerHealthCheck, aws_loadbalancer.go): without the default, the CCM panics on its
# first load balancer. docs/providers.md lists this gap.
import sys

from moto.elb import models
from moto.server import main

_create_load_balancer = models.ELBBackend.create_load_balancer


def create_load_balancer(self, *args, **kwargs):
    balancer = _create_load_balancer(self, *args, **kwargs)
    if balancer.health_check is None:
        port = balancer.listeners[0].instance_port if balancer.listeners else 80
        self.configure_health_check(balancer.name, "5", "10", "2", "30", f"TCP:{port}")
    return balancer


models.ELBBackend.create_load_balancer = create_load_balancer

if __name__ == "__main__":
    sys.exit(main())
