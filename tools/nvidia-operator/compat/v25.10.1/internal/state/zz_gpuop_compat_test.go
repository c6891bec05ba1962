/*
gpuop differential oracle at NVIDIA/gpu-operator v25.10.1, NVIDIADriver half: what the renderer's harness
(../shared/tools/nvidia-operator/harness/internal/state/zz_gpuop_render_test.go, edited for this tag by
tools/nvidia-operator/build_release.py HARNESS_EDITS) needs beyond the tag's own code.

v25.10.1's getManifestObjects reads the whole ClusterPolicy from the info catalog (internal/state/driver.go
L232-238, InfoTypeClusterPolicyCR; v26.7.0 takes the host root alone): the harness keeps the ClusterPolicy it
reads here and adds it. There is no internal/nvidiadriver.AssignOwners at v25.10.1: getNodePools
(internal/state/nodepool.go L55) selects each CR's nodes by its nodeSelector while rendering, after the controller checked that no two CRs
select one node (controllers/nvidiadriver_controller.go L140, internal/validator/validator.go): with any overlap
it renders none of them; the harness runs that check first (gpuopValidateNodeSelector). Its
clusterinfo.Interface (controllers/clusterinfo/clusterinfo.go L42-50) has three more methods; the rendering calls
only GetKubernetesVersion (getRuntimeSpec, internal/state/driver.go L612), answered from the facts as the
ClusterPolicy half answers KubernetesVersion().
*/

package state

import (
	"context"
	ejson "encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/client"

	gpuv1 "github.com/NVIDIA/gpu-operator/api/nvidia/v1"
	nvidiav1alpha1 "github.com/NVIDIA/gpu-operator/api/nvidia/v1alpha1"
	"github.com/NVIDIA/gpu-operator/internal/validator"
)

// the ClusterPolicy of NVOP_CP, as the NVIDIADriver controller reads it from the cluster
var gpuopClusterPolicy gpuv1.ClusterPolicy

// GetKubernetesVersion: the facts' k8sVersion, with the controllers harness's default
func (i gpuopClusterInfo) GetKubernetesVersion() (string, error) {
	b, err := os.ReadFile(os.Getenv("NVOP_FACTS"))
	if err != nil {
		return "", err
	}
	var facts gpuopFacts
	if err := ejson.Unmarshal(b, &facts); err != nil {
		return "", err
	}
	if facts.K8sVersion == "" {
		return "v1.33.0", nil
	}
	return facts.K8sVersion, nil
}

// the NVIDIADriver rendering at v25.10.1 never calls these (only the ClusterPolicy controller's node
// discovery does); an error, not an invented answer, if a rendering ever does
func (i gpuopClusterInfo) GetRHCOSVersions(map[string]string) ([]string, error) {
	return nil, fmt.Errorf("GetRHCOSVersions is not answered by the gpuop harness")
}

func (i gpuopClusterInfo) GetKernelVersions(map[string]string) ([]string, error) {
	return nil, fmt.Errorf("GetKernelVersions is not answered by the gpuop harness")
}

// the NVIDIADriver controller's check before it renders a CR: every CR's nodeSelector (all GPU nodes when it has
// none) against every other's; a node two CRs select fails the reconcile of each
func gpuopValidateNodeSelector(ctx context.Context, c client.Client, cr *nvidiav1alpha1.NVIDIADriver) error {
	return validator.NewNodeSelectorValidator(c).Validate(ctx, cr)
}
