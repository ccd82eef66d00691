# The jobs `gpulayer demo` plans and applies on a sandbox fleet (docs/sandbox.md).
# The sandbox writes the fleets (sandbox.hcl: machines in europe-west1 and
# us-central1, pairs of machines per network group); these are the jobs.
#
# The programs are small shell loops standing in for training: each prints
# what gpulayer gave it (rank, GPUs, rendezvous) and then a step a second.

policy "one_zone" {
  group_locality = "zone"
  regions        = ["europe-west1"]
}

policy "one_rack" {
  group_locality   = "network_group"
  on_unschedulable = "wait"
}

# Two machines of one zone, four GPUs each: the best-connected four.
job "train" {
  policy        = policy.one_zone
  nodes         = 2
  gpus_per_node = 4
  launcher      = "plain"
  stop_timeout  = "5s"
  command = ["sh", "-c", <<-EOT
    echo "node $NODE_RANK of $NNODES (world size $WORLD_SIZE), GPUs $CUDA_VISIBLE_DEVICES, rendezvous $MASTER_ADDR:$MASTER_PORT"
    step=0
    while [ $step -lt 3600 ]; do
      step=$((step + 1))
      echo "step $step loss 0.$((1000 - step % 1000))"
      sleep 1
    done
  EOT
  ]
}

# One GPU, wherever the fleet has one free.
job "eval" {
  nodes         = 1
  gpus_per_node = 1
  launcher      = "plain"
  stop_timeout  = "5s"
  command       = ["sh", "-c", "echo evaluating on GPU $CUDA_VISIBLE_DEVICES; while :; do sleep 5; echo still evaluating; done"]
  env           = { CHECKPOINT = "runs/latest" }
}

# More than any one rack holds: it waits, and the plan says why.
job "big" {
  policy        = policy.one_rack
  nodes         = 3
  gpus_per_node = 8
  command       = ["python", "big.py"]
}
