"""Who a person is: the principal a checked request names, and OAuth access and ID tokens checked at the issuer."""
