# One image for web, worker, beat and the demo target (docker-compose.yml picks the command).
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm openssl libnghttp2-14 \
 && rm -rf /var/lib/apt/lists/*
# The processes run as this unprivileged user. The code stays root-owned (read-only for it); it may
# write only var/ and the secrets directory (docker-compose mounts a volume there, which takes this
# directory's owner and mode on first use).
RUN groupadd --system --gid 10001 tollgate \
 && useradd --system --uid 10001 --gid tollgate --create-home --home-dir /home/tollgate \
      --shell /usr/sbin/nologin tollgate \
 && install -d -o tollgate -g tollgate -m 0700 /var/lib/tollgate/secrets
WORKDIR /app
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY . .
# collectstatic needs settings, hence demo mode with throwaway secrets outside the image's var/.
RUN node -e "const fs=require('fs');fs.mkdirSync('static/vendor',{recursive:true});fs.copyFileSync('node_modules/chart.js/dist/chart.umd.min.js','static/vendor/chart.umd.js')" \
 && TOLLGATE_DEMO=1 TOLLGATE_VAR_DIR=/tmp/tollgate-build python manage.py collectstatic --noinput \
 && rm -rf /tmp/tollgate-build /app/var \
 && install -d -o tollgate -g tollgate -m 0750 /app/var
USER 10001:10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--worker-class", "gthread", "--workers", "2", "--threads", "4"]
