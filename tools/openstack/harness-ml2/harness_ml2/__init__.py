"""An ML2 mechanism driver that binds every port, on any host, to the first segment offered.

Neutron's own `test` driver (neutron.tests.unit.plugins.ml2.drivers.mechanism_test) binds only
on three fixed host names and asserts on state it keeps in memory: with neutron 29.0.0 its
bind_port fails that assertion on the binding Nova asks for, so no server ever boots. Agent-based
drivers need agents. This driver does what they would report: the port is bound, as OVS, and up.
"""

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api


class BindEveryPort(api.MechanismDriver):
    def initialize(self):
        pass

    def bind_port(self, context):
        segment = context.segments_to_bind[0]
        context.set_binding(
            segment[api.ID],
            portbindings.VIF_TYPE_OVS,
            {portbindings.CAP_PORT_FILTER: False},
            status=constants.PORT_STATUS_ACTIVE,
        )
