fleet "cloud" {
  count = 1
  gcp {
    project          = "my-project"
    zone             = "us-central1-a"
    machine_type     = "n1-standard-8"
    image            = "projects/deeplearning-platform-release/global/images/family/pytorch-latest-gpu"
    accelerator_type = "nvidia-tesla-t4"
  }
}
