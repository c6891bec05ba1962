#!/bin/sh

until [ -f /run/nvidia/validations/driver-ready ]
do
  echo "waiting for the driver validations to be ready..."
  sleep 5
done

set -o allexport
cat /run/nvidia/validations/driver-ready
. /run/nvidia/validations/driver-ready

#
# The below delay is a workaround for an issue affecting some versions
# of containerd starting with 1.6.9. Staring with containerd 1.6.9 we
# started seeing the toolkit container enter a crashloop whereby it
# would receive a SIGTERM shortly after restarting containerd.
#
# Refer to the commit message where this workaround was implemented
# for additional details:
#   https://github.com/NVIDIA/gpu-operator/commit/963b8dc87ed54632a7345c1fcfe842f4b7449565
#
sleep 5

exec nvidia-toolkit