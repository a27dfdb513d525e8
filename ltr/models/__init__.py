"""Networks: backbone, target_classifier (DiMP), bbreg (energy box head), tracking (DiMPNet), detection, toy1d."""
