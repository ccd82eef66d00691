policy "tight" {
  bucket_choice = "bestfit"
}
