/*
gpuop differential oracle at NVIDIA/gpu-operator v26.3.3, NVIDIADriver half: what the renderer's harness
(../shared/tools/nvidia-operator/harness/internal/state/zz_gpuop_render_test.go, edited for this tag by
tools/nvidia-operator/build_release.py HARNESS_EDITS) needs beyond the tag's own code.

v26.3.3's getManifestObjects reads the whole ClusterPolicy from the info catalog (internal/state/driver.go
L255-261, InfoTypeClusterPolicyCR; v26.7.0 takes the host root alone): the harness keeps the ClusterPolicy it
reads here and adds it. There is no internal/nvidiadriver.AssignOwners at v26.3.3: getNodePools
(internal/state/nodepool.go L58) selects each CR's nodes by its nodeSelector while rendering, after the controller checked that no two CRs
select one node (controllers/nvidiadriver_controller.go L146, internal/validator/validator.go): with any overlap
it renders none of them; the harness runs that check first (gpuopValidateNodeSelector).
*/

package state

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/NVIDIA/gpu-operator/api/nvidia/v1"
	nvidiav1alpha1 "github.com/NVIDIA/gpu-operator/api/nvidia/v1alpha1"
	"github.com/NVIDIA/gpu-operator/internal/validator"
)

// the ClusterPolicy of NVOP_CP, as the NVIDIADriver controller reads it from the cluster
var gpuopClusterPolicy gpuv1.ClusterPolicy

// the NVIDIADriver controller's check before it renders a CR: every CR's nodeSelector (all GPU nodes when it has
// none) against every other's; a node two CRs select fails the reconcile of each
func gpuopValidateNodeSelector(ctx context.Context, c client.Client, cr *nvidiav1alpha1.NVIDIADriver) error {
	return validator.NewNodeSelectorValidator(c).Validate(ctx, cr)
}
