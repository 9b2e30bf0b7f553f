"""What goes out, what stays secret, what is signed: the outbound address policy, secrets at rest,
report signing, webhook signatures, target verification, SSH keys, credentials kept out of reports."""
