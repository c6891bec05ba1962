/*
gpuop differential oracle at NVIDIA/gpu-operator v26.3.3 and v25.10.1: the three names the renderer's harness
(../shared/tools/nvidia-operator/harness/controllers/zz_gpuop_render_test.go) takes from v26.7.0, defined with
those tags' own code (the same at both). Dropped beside the harness into controllers/ of a copy of an unmodified
checkout of either tag by tools/nvidia-operator/build_release.py; nothing of NVIDIA's is changed.

Before v26.7.0 there is no node labelling controller: ClusterPolicyController.init() (controllers/state_manager.go
L854-1005 at v26.3.3, L754-888 at v25.10.1) sets up sandbox workloads and the Driver Toolkit request, then
labelGPUNodes() (L521 / L480) labels the nodes, counts the GPU nodes and records their RHCOS builds in one pass.
*/

package controllers

import (
	"context"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/NVIDIA/gpu-operator/api/nvidia/v1"
)

// nodeLabelingController stands in for v26.7.0's NodeLabelingReconciler: it labels the nodes with the tag's
// labelGPUNodes, run by a ClusterPolicyController set up as init() sets it up before that call.
type nodeLabelingController struct {
	client        client.Client
	namespace     string
	clusterPolicy *gpuv1.ClusterPolicy
	logger        logr.Logger
}

func (c *nodeLabelingController) labelGPUNodes(ctx context.Context) (int, error) {
	n := &ClusterPolicyController{ctx: ctx, client: c.client, singleton: c.clusterPolicy, logger: c.logger,
		operatorNamespace: c.namespace, operatorMetrics: operatorMetricsForGpuop()}
	// init() state_manager.go L912-924 (v25.10.1 L806-818): the workload config a node without a label gets
	if c.clusterPolicy.Spec.SandboxWorkloads.IsEnabled() {
		n.sandboxEnabled = true
		if isValidWorkloadConfig(c.clusterPolicy.Spec.SandboxWorkloads.DefaultWorkload) {
			defaultGPUWorkloadConfig = c.clusterPolicy.Spec.SandboxWorkloads.DefaultWorkload
		}
	}
	_, count, err := n.labelGPUNodes()
	return count, err
}

// discoverGPUNodes is the tag's labelGPUNodes on the controller itself, as init() calls it (L956 / L850): the nodes are
// labelled already, so it changes none; it counts the GPU nodes and collects their RHCOS builds for the Driver
// Toolkit (n.ocpDriverToolkit, set up by the harness before this call as init() does before it).
func (n *ClusterPolicyController) discoverGPUNodes() (bool, int, error) {
	return n.labelGPUNodes()
}

// InitOperatorMetrics is the tag's initOperatorMetrics (operator_metrics.go L69), exported at v26.7.0.
func InitOperatorMetrics() *OperatorMetrics {
	return initOperatorMetrics()
}
